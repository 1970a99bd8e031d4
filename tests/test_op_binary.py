"""aten.add/sub/mul.Tensor: broadcasting, 0-d operands, alpha, int outputs."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.kernels.elementwise.binary import broadcast_strides, collapse_dims
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

CASES = [
    ("aten.add.Tensor", (3, 7, 5), (3, 7, 5), 1),
    ("aten.add.Tensor", (2, 1, 13), (9, 1), 1),      # both sides broadcast
    ("aten.sub.Tensor", (1, 5, 33), (), 1),           # 0-d operand
    ("aten.sub.Tensor", (7, 3), (7, 3), 2.5),         # alpha
    ("aten.mul.Tensor", (4, 1, 3, 5), (1, 6, 1, 5), None),
    ("aten.mul.Tensor", (1,), (1,), None),
    ("aten.add.Tensor", (300, 259), (259,), 1),       # > one workgroup, odd
    # collapsed walks: a scalar-like operand (flat index and 0), merged broadcast dims
    ("aten.mul.Tensor", (1, 3, 4, 5), (1, 1, 1, 1), None),
    ("aten.add.Tensor", (2, 3, 4, 5), (2, 1, 1, 5), 1),
    ("aten.sub.Tensor", (6, 1, 4, 5), (1, 7, 4, 5), 1),
]


def _graph(name, sa, sb, alpha, out_dtype=np.float32, in_dtype=np.float32):
    b = GraphBuilder()
    x, y = b.tensor(in_dtype, sa), b.tensor(in_dtype, sb)
    out_shape = np.broadcast_shapes(sa, sb)
    o = b.tensor(out_dtype, out_shape)
    if alpha is None:
        b.op(name, x, y, o)
    else:
        b.op(name, x, y, b.scalar(alpha), o)
    return b.build([x, y], [o])


@pytest.mark.parametrize("name,sa,sb,alpha", CASES)
def test_binary_f32(gpu, rng, name, sa, sb, alpha):
    g, blob = _graph(name, sa, sb, alpha)
    xs = [rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    expect = {"aten.add.Tensor": lambda a, b: a + (alpha or 1) * b,
              "aten.sub.Tensor": lambda a, b: a - (alpha or 1) * b,
              "aten.mul.Tensor": lambda a, b: a * b}[name](*xs)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs numpy")
    assert_close(out, ref, rel=1e-5, what=name)


def test_binary_int32_exact(gpu, rng):
    g, blob = _graph("aten.mul.Tensor", (5, 3), (3,), None, np.int32, np.int32)
    xs = [rng.integers(-1000, 1000, (5, 3)).astype(np.int32),
          rng.integers(-1000, 1000, (3,)).astype(np.int32)]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    assert_close(out, ref, exact=True)
    assert_close(ref, xs[0] * xs[1], exact=True)


def test_binary_with_constant_operand(gpu, rng):
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 11))
    w = b.constant(rng.standard_normal((11,)).astype(np.float32))
    o = b.tensor(np.float32, (3, 11))
    b.op("aten.add.Tensor", x, w, b.scalar(1), o)
    g, blob = b.build([x], [o])
    xv = rng.standard_normal((3, 11)).astype(np.float32)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    assert_close(out, ref, rel=1e-6)


def _graph_mode(name, sa, sb, mode, dtype, out_dtype=None):
    """A binary op without alpha; `mode` is div.Tensor_mode's rounding_mode."""
    b = GraphBuilder()
    x, y = b.tensor(dtype, sa), b.tensor(dtype, sb)
    o = b.tensor(out_dtype or dtype, np.broadcast_shapes(sa, sb))
    extra = [b.scalar(mode)] if name == "aten.div.Tensor_mode" else []
    b.op(name, x, y, *extra, o)
    return b.build([x, y], [o])


# name, rounding mode, independent float64 formula
F32_OPS = [
    ("aten.minimum.default", None, np.minimum),
    ("aten.maximum.default", None, np.maximum),
    ("aten.pow.Tensor_Tensor", None, np.power),
    ("aten.div.Tensor", None, np.divide),
    ("aten.div.Tensor_mode", "trunc", lambda a, b: np.trunc(a / b)),
    ("aten.div.Tensor_mode", "floor", lambda a, b: np.floor(a / b)),
]


@pytest.mark.parametrize("sa,sb", [((3, 7, 5), (3, 7, 5)), ((2, 3, 8), (3, 1)), ((1,), ())])
@pytest.mark.parametrize("name,mode,exact", F32_OPS,
                         ids=[f"{c[0].split('.')[1]}-{c[1]}" for c in F32_OPS])
def test_binary_f32_ops(gpu, rng, name, mode, exact, sa, sb):
    g, blob = _graph_mode(name, sa, sb, mode, np.float32)
    pos = name.startswith("aten.pow")          # a positive base: no NaN from a fraction
    x = rng.uniform(0.1 if pos else -8, 3 if pos else 8, sa).astype(np.float32)
    y = rng.uniform(-2 if pos else 0.5, 3 if pos else 4, sb).astype(np.float32)
    if not pos:
        y = y * rng.choice([-1, 1], sb).astype(np.float32)
    if x.size > 1 and y.shape == x.shape:
        x.flat[1], y.flat[1] = 6.0, 2.0     # an exact quotient: floor/trunc at the edge
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    expect = exact(x.astype(np.float64), y.astype(np.float64))
    rounded = mode is not None
    if rounded:   # the kernel floors the f32 quotient, so compare with that
        expect = exact(x, y).astype(np.float64)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, atol=1e-6, rtol=1e-6,
                 what="reference vs numpy")
    assert_close(out, ref, rel=1e-5, atol=0, rtol=1e-5 if pos else 1e-6,
                 exact=not pos and not name.startswith("aten.div.Tensor"), what=name)


def test_pow_tensor_follows_torch_special_cases(gpu):
    """0^0 = 1, 0^-y = inf, a negative base: signed integer powers and NaN for fractions."""
    x = np.array([0, 0, 0, -2, -2, -2, -2, 1.5, -0.5, 3], np.float32)
    y = np.array([0, 2, -1, 3, 2, 0.5, -3, 0, 0, -2], np.float32)
    g, blob = _graph_mode("aten.pow.Tensor_Tensor", x.shape, y.shape, None, np.float32)
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    with np.errstate(all="ignore"):
        expect = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(expect)
    for arr, what in ((ref, "reference"), (out, "gpu")):
        assert (np.isnan(arr) == np.isnan(expect)).all(), f"{what}: {arr} vs {expect}"
        assert (arr[np.isinf(expect)] == expect[np.isinf(expect)]).all(), f"{what}: {arr}"
        assert_close(arr[finite], expect[finite], rel=1e-6, atol=0, rtol=1e-6, what=what)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_int_division_exact(gpu, rng, mode):
    """torch's int floor/trunc division (signs mixed); WGSL's x / 0 = x where torch raises."""
    shape = (5, 11)
    g, blob = _graph_mode("aten.div.Tensor_mode", shape, shape, mode, np.int32)
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    y = rng.integers(-30, 30, shape).astype(np.int32)
    y[y == 0] = 7
    y.flat[0], x.flat[1], y.flat[1] = 0, -2 ** 31, -1
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    py = [(a if b == 0 else a if (a, b) == (-2 ** 31, -1) else
           a // b if mode == "floor" else int(a / b)) for a, b in zip(x.flat, y.flat, strict=True)]
    assert_close(ref, np.array(py, np.int64).astype(np.int32).reshape(shape), exact=True,
                 what="reference vs python")
    assert_close(out, ref, exact=True, what=f"div {mode}")


def test_int_minimum_maximum_exact(gpu, rng):
    for name, f in (("aten.minimum.default", np.minimum), ("aten.maximum.default", np.maximum)):
        g, blob = _graph_mode(name, (4, 1, 3), (5, 1), None, np.int32)
        xs = [rng.integers(-99, 99, (4, 1, 3)).astype(np.int32),
              rng.integers(-99, 99, (5, 1)).astype(np.int32)]
        (out,), (ref,) = run_graph_both(g, blob, xs)
        assert_close(ref, f(*xs), exact=True, what="reference vs numpy")
        assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("name,mode,dtype,match", [
    ("aten.div.Tensor_mode", "round", np.float32, "rounding_mode='round'"),
    ("aten.pow.Tensor_Tensor", None, np.int32, "should be a float32 tensor"),
    ("aten.div.Tensor_mode", None, np.int32, "integer output"),
])
def test_binary_unsupported(name, mode, dtype, match):
    from webpte.errors import PlanError, UnsupportedOpError
    g, _ = _graph_mode(name, (4,), (4,), mode, dtype)
    with pytest.raises((UnsupportedOpError, PlanError), match=match):
        lower(g)


def test_binary_broadcast_mismatch_is_unsupported():
    from webpte.errors import UnsupportedOpError
    b = GraphBuilder()
    x, y, o = b.tensor(np.float32, (3, 4)), b.tensor(np.float32, (5,)), b.tensor(np.float32,
                                                                               (3, 4))
    b.op("aten.minimum.default", x, y, o)
    g, _ = b.build([x, y], [o])
    with pytest.raises(UnsupportedOpError, match="cannot broadcast"):
        lower(g)


@pytest.mark.parametrize("dims,ins,walk", [
    ((1, 12, 64, 64), [(1, 12, 64, 64), (1, 1, 1, 1)], [12 * 64 * 64]),
    ((2, 3, 4, 5), [(2, 3, 4, 5), (2, 1, 1, 5)], [2, 12, 5]),
    ((6, 7, 4, 5), [(6, 1, 4, 5), (1, 7, 4, 5)], [6, 7, 20]),
    ((1, 1), [(1, 1), ()], [1]),
])
def test_collapse_dims_keeps_every_offset(dims, ins, walk):
    """The collapsed walk gives each operand the same offset for every flat index."""
    strides = [broadcast_strides(d, dims) for d in ins]
    got_dims, got_strides = collapse_dims(dims, strides)
    assert got_dims == walk
    for i in range(int(np.prod(dims))):
        full = np.unravel_index(i, dims)
        short = np.unravel_index(i, got_dims)
        for st, gst in zip(strides, got_strides, strict=True):
            offset = sum(int(c) * s for c, s in zip(full, st, strict=True))
            assert offset == sum(int(c) * s for c, s in zip(short, gst, strict=True))
