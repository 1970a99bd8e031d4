"""Comparisons (.Tensor / .Scalar) to bool, logical and bitwise ops, where.self and the
creation ops (full, zeros, ones, their _like forms, scalar_tensor): all bit-exact."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

_NP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}


def _graph(name, in_specs, out_dtype, out_shape, scalars=()):
    """`name`(inputs..., scalars..., out); in_specs: (dtype, shape) per graph input."""
    b = GraphBuilder()
    xs = [b.tensor(d, s) for d, s in in_specs]
    o = b.tensor(out_dtype, out_shape)
    b.op(name, *xs, *[b.scalar(v) for v in scalars], o)
    return b.build(xs, [o])


@pytest.mark.parametrize("op", list(_NP))
@pytest.mark.parametrize("sa,sb", [((67,), (67,)), ((2, 3, 8), (3, 1)), ((1,), ())], ids=str)
def test_compare_tensor_f32(gpu, rng, op, sa, sb):
    g, blob = _graph(f"aten.{op}.Tensor", [(np.float32, sa), (np.float32, sb)], np.bool_,
                     np.broadcast_shapes(sa, sb))
    # few distinct values: many equal pairs; 1 ulp apart must not compare equal
    x = rng.integers(-2, 3, sa).astype(np.float32) / 4
    y = rng.integers(-2, 3, sb).astype(np.float32) / 4
    if x.size > 2:
        x.flat[2] = np.nextafter(y.flat[0], np.float32(1))
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    assert_close(ref, _NP[op](x, y), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True, what=op)


@pytest.mark.parametrize("op,dtype,scalar", [("gt", np.float32, 0.25), ("eq", np.float32, -0.5),
                                             ("le", np.int32, 3), ("ne", np.int8, -1),
                                             ("lt", np.int32, 2.5), ("ge", np.uint8, 200)])
def test_compare_scalar(gpu, rng, op, dtype, scalar):
    shape = (5, 7)
    g, blob = _graph(f"aten.{op}.Scalar", [(dtype, shape)], np.bool_, shape, [scalar])
    x = (rng.integers(-4, 5, shape) / (4 if dtype == np.float32 else 1)).astype(dtype)
    if dtype == np.uint8:
        x = rng.integers(190, 210, shape).astype(dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, _NP[op](x.astype(np.float64), scalar), exact=True, what="reference")
    assert_close(out, ref, exact=True, what=op)


def test_compare_int_tensors_and_float_output(gpu, rng):
    """int32 vs int32 in exact i32 (beyond f32's 2^24), the bool stored as float32 0/1."""
    shape = (3, 11)
    g, blob = _graph("aten.lt.Tensor", [(np.int32, shape), (np.int32, shape)], np.bool_, shape)
    x = rng.integers(2 ** 25, 2 ** 25 + 4, shape).astype(np.int32)
    y = rng.integers(2 ** 25, 2 ** 25 + 4, shape).astype(np.int32)
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    assert_close(ref, x < y, exact=True, what="reference")
    assert_close(out, ref, exact=True)


LOGICAL = [("aten.logical_and.default", np.logical_and),
           ("aten.logical_or.default", np.logical_or),
           ("aten.logical_xor.default", np.logical_xor),
           ("aten.bitwise_and.Tensor", np.bitwise_and),
           ("aten.bitwise_or.Tensor", np.bitwise_or),
           ("aten.bitwise_xor.Tensor", np.bitwise_xor)]


@pytest.mark.parametrize("name,f", LOGICAL, ids=[n.split(".")[1] for n, _ in LOGICAL])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
def test_logical_bitwise(gpu, rng, name, f, dtype):
    sa, sb = (3, 1, 13), (5, 1)
    out_dtype = np.bool_ if "logical" in name else dtype
    g, blob = _graph(name, [(dtype, sa), (dtype, sb)], out_dtype, (3, 5, 13))
    x = rng.integers(0, 2 if dtype == np.bool_ else 250, sa).astype(dtype)
    y = rng.integers(0, 2 if dtype == np.bool_ else 250, sb).astype(dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x, y])
    assert_close(ref, f(x, y).astype(out_dtype), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("name,dtype,f", [
    ("aten.bitwise_not.default", np.bool_, np.logical_not),
    ("aten.bitwise_not.default", np.int32, np.invert),
    ("aten.bitwise_not.default", np.uint8, np.invert),
    ("aten.logical_not.default", np.float32, np.logical_not),
])
def test_not(gpu, rng, name, dtype, f):
    shape = (67,)
    out_dtype = np.bool_ if "logical" in name else dtype
    g, blob = _graph(name, [(dtype, shape)], out_dtype, shape)
    x = rng.integers(0, 2 if dtype == np.bool_ else 250, shape).astype(dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, f(x).astype(out_dtype), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8], ids=lambda d: np.dtype(d).name)
def test_where(gpu, rng, dtype):
    sc, sa, sb = (2, 1, 9), (4, 9), ()
    g, blob = _graph("aten.where.self", [(np.bool_, sc), (dtype, sa), (dtype, sb)], dtype,
                     (2, 4, 9))
    c = rng.integers(0, 2, sc).astype(np.bool_)
    a = (rng.standard_normal(sa) * 50).astype(dtype)
    b = np.array(-7, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [c, a, b])
    assert_close(ref, np.where(c, a, b), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True)


@pytest.mark.parametrize("name,args,dtype,value", [
    ("aten.full.default", ([3, 5, 7], -np.inf), np.float32, -np.inf),
    ("aten.full.default", ([67], 2.7), np.int32, 2),          # truncated, as torch casts
    ("aten.full.default", ([13], 0.1), np.float32, np.float32(0.1)),
    ("aten.zeros.default", ([2, 9],), np.float32, 0.0),
    ("aten.ones.default", ([5, 3],), np.int8, 1),
    ("aten.ones.default", ([11],), np.bool_, True),
    ("aten.scalar_tensor.default", (3.5,), np.float32, 3.5),
])
def test_creation(gpu, name, args, dtype, value):
    shape = tuple(args[0]) if isinstance(args[0], list) else ()
    g, blob = _graph(name, [], dtype, shape, [*args, *[None] * 4])   # dtype .. pin_memory
    (out,), (ref,) = run_graph_both(g, blob, [])
    assert_close(ref, np.full(shape, value, dtype), exact=True, what="reference")
    assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("name,fill,dtype,value", [
    ("aten.full_like.default", [np.nan], np.float32, np.nan),
    ("aten.zeros_like.default", [], np.int32, 0),
    ("aten.ones_like.default", [], np.float32, 1.0),
])
def test_creation_like(gpu, rng, name, fill, dtype, value):
    shape = (3, 7)
    g, blob = _graph(name, [(dtype, shape)], dtype, shape, [*fill, *[None] * 5])
    x = rng.standard_normal(shape).astype(dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    expect = np.full(shape, value, dtype)
    assert ref.tobytes() == expect.tobytes() and out.tobytes() == ref.tobytes()


@pytest.mark.parametrize("name,in_specs,out,scalars,match", [
    ("aten.bitwise_and.Tensor", [(np.float32, (4,))] * 2, (np.float32, (4,)), (),
     "only int and bool"),
    ("aten.eq.Scalar", [(np.int32, (4,))], (np.bool_, (4,)), (2 ** 40,), "outside int32"),
    ("aten.where.self", [(np.bool_, (3,)), (np.float32, (4,)), (np.float32, (4,))],
     (np.float32, (4,)), (), "cannot broadcast"),
    ("aten.full.default", [], (np.float32, (4,)), ([5], 1.0, None, None, None, None), "size"),
    ("aten.full.default", [], (np.int32, (4,)), ([4], np.inf, None, None, None, None),
     "outside int32"),
])
def test_unsupported(name, in_specs, out, scalars, match):
    g, _ = _graph(name, in_specs, out[0], out[1], scalars)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(g)
