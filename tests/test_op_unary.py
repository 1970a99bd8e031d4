"""Unary elementwise ops: round, clamp, relu, sigmoid, gelu (tanh / erf) in every storage kind."""

import math

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.kernels.elementwise.unary import erf_f32
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

_erf = np.vectorize(math.erf)


def _graph(name, shape, extra=(), in_dtype=np.float32, out_dtype=np.float32):
    b = GraphBuilder()
    x = b.tensor(in_dtype, shape)
    o = b.tensor(out_dtype, shape)
    b.op(name, x, *[b.scalar(v) for v in extra], o)
    return b.build([x], [o])


def _gelu_exact(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh_exact(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


# name, extra args, independent float64 formula
F32_CASES = [
    ("aten.round.default", (), lambda x: np.round(x.astype(np.float64))),
    ("aten.clamp.default", (-0.75, 1.25), lambda x: np.clip(x, -0.75, 1.25)),
    ("aten.clamp.default", (None, 0.5), lambda x: np.minimum(x, 0.5)),
    ("aten.clamp.default", (-1, None), lambda x: np.maximum(x, -1)),   # Int bound on floats
    ("aten.relu.default", (), lambda x: np.maximum(x, 0)),
    ("aten.sigmoid.default", (), lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    ("aten.gelu.default", ("tanh",), _gelu_tanh_exact),
    ("aten.gelu.default", ("none",), _gelu_exact),
]
SHAPES = [(3, 7, 5), (1,), (1, 1, 13), (300, 259)]  # odd, size-1 dims, > one workgroup


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,extra,exact", F32_CASES,
                         ids=[f"{c[0].split('.')[1]}{c[1]}" for c in F32_CASES])
def test_unary_f32(gpu, rng, name, extra, exact, shape):
    g, blob = _graph(name, shape, extra)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.flat[: min(x.size, 6)] = [0.5, 1.5, 2.5, -0.5, -2.5, 7.0][: min(x.size, 6)]  # ties
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, exact(x).astype(np.float32), rel=1e-6, atol=3e-7, rtol=3e-6,
                 what="reference vs float64 formula")
    exact_ok = name in ("aten.round.default", "aten.clamp.default", "aten.relu.default")
    assert_close(out, ref, rel=1e-5, exact=exact_ok, what=name)


def test_gelu_erf_is_accurate(gpu, rng):
    """The kernel's erf against math.erf through gelu (erf error <= 1.5e-7 -> bound below)."""
    x = np.concatenate([np.linspace(-9, 9, 2001), rng.uniform(-4, 4, 1000),
                        [0.0, -0.0, 1.0, -1.0, 2.0, 1.4142135, 2.828427]]).astype(np.float32)
    g, blob = _graph("aten.gelu.default", x.shape, ("none",))
    (out,), (ref,) = run_graph_both(g, blob, [x])
    exact = _gelu_exact(x)
    # |0.5 x| * erf error + f32 rounding of the last two products
    bound = 0.5 * np.abs(x) * 1.5e-7 + 2.5 * np.spacing(np.abs(exact).astype(np.float32))
    for arr, what in ((out, "gpu"), (ref, "reference")):
        err = np.abs(arr.astype(np.float64) - exact)
        worst = int(np.argmax(err - bound))
        assert (err <= bound).all(), \
            f"{what}: gelu(x={x[worst]}) = {arr[worst]}, exact {exact[worst]}"


def test_erf_f32_against_math_erf():
    """No GPU: the numpy twin of the kernel's erf over a dense grid and the extremes."""
    x = np.concatenate([np.linspace(-6, 6, 400001),
                        [0, 1, -1, 2, -2, 3.95, 1e-30, 1e30, -1e30]]).astype(np.float32)
    err = np.abs(erf_f32(x).astype(np.float64) - _erf(x.astype(np.float64)))
    assert err.max() <= 1.5e-7, f"max |erf_f32 - erf| = {err.max():.3e} at x={x[err.argmax()]}"


INT_CASES = [
    ("aten.relu.default", (), np.int32, np.int32, lambda x: np.maximum(x, 0)),
    ("aten.clamp.default", (-50, 70), np.int32, np.int32, lambda x: np.clip(x, -50, 70)),
    ("aten.round.default", (), np.int64, np.int64, lambda x: x),
    ("aten.clamp.default", (-100, 100), np.int8, np.int8, lambda x: np.clip(x, -100, 100)),
    ("aten.relu.default", (), np.uint8, np.uint8, lambda x: x),
    ("aten.clamp.default", (3, None), np.uint8, np.uint8, lambda x: np.maximum(x, 3)),
]


@pytest.mark.parametrize("name,extra,din,dout,exact", INT_CASES,
                         ids=[f"{c[0].split('.')[1]}-{np.dtype(c[2]).name}" for c in INT_CASES])
def test_unary_int_exact(gpu, rng, name, extra, din, dout, exact):
    shape = (5, 11)  # 55 elements: the last packed word is partial
    g, blob = _graph(name, shape, extra, din, dout)
    info = np.iinfo(din) if np.dtype(din).itemsize == 1 else np.iinfo(np.int16)
    x = rng.integers(info.min, info.max, shape, endpoint=True).astype(din)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, exact(x).astype(ref.dtype), exact=True, what="reference vs numpy")
    assert_close(out, ref.astype(out.dtype), exact=True, what=name)


def test_round_f32_to_packed_int8(gpu, rng):
    """Mixed kinds: f32 in, int8 out (packed 4 per word), odd numel; the quantize recipe."""
    shape = (3, 7)
    g, blob = _graph("aten.round.default", shape, (), np.float32, np.int8)
    x = rng.uniform(-120, 120, shape).astype(np.float32)
    x.flat[:4] = [0.5, -2.5, 3.5, -0.49]
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, np.round(x).astype(np.int8), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True)


def test_clamp_bound_beyond_f32_is_dropped():
    """max=1e300 rounds to +inf in f32: a no-op bound, so only min is applied."""
    g, _ = _graph("aten.clamp.default", (5,), (-1.0, 1e300))
    wgsl = lower(g).kernels[0].wgsl
    assert "max(x," in wgsl and "min(" not in wgsl


def test_sigmoid_of_bool_and_int_inputs(gpu, rng):
    for din in (np.bool_, np.int32):
        g, blob = _graph("aten.sigmoid.default", (2, 9), (), din, np.float32)
        x = rng.integers(-3, 4, (2, 9)).astype(din)
        (out,), (ref,) = run_graph_both(g, blob, [x])
        expect = 1 / (1 + np.exp(-x.astype(np.float64)))
        assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs numpy")
        assert_close(out, ref, rel=1e-5)


@pytest.mark.parametrize("name,extra,din,match", [
    ("aten.gelu.default", ("erf",), np.float32, "approximate='erf'"),
    ("aten.clamp.default", (None, None), np.float32, "at least one of min and max"),
    ("aten.clamp.default", (0.5, 2), np.int32, "non-integer bound"),
    ("aten.clamp.default", (1e300, None), np.float32, "no finite result"),
])
def test_unary_unsupported(name, extra, din, match):
    g, _ = _graph(name, (4,), extra, din, din)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(g)


# -- unary_math.py: abs, neg, exp, sqrt, rsqrt, sin, cos, tanh, hardswish, leaky_relu, pow --

def _f64(f):
    return lambda x: f(x.astype(np.float64))


# name, extra args, input range, independent float64 formula, GPU-vs-reference atol: WGSL's
# sin/cos are bounded to 2^-11 absolute on [-pi, pi], the rest to a few ulp.
MATH_CASES = [
    ("aten.abs.default", (), (-6, 6), _f64(np.abs), 0),
    ("aten.neg.default", (), (-6, 6), _f64(np.negative), 0),
    ("aten.exp.default", (), (-9, 9), _f64(np.exp), 1e-6),
    ("aten.sqrt.default", (), (0, 40), _f64(np.sqrt), 1e-6),
    ("aten.rsqrt.default", (), (0.05, 40), _f64(lambda x: 1 / np.sqrt(x)), 1e-6),
    ("aten.sin.default", (), (-60, 60), _f64(np.sin), 2 ** -11),
    ("aten.cos.default", (), (-60, 60), _f64(np.cos), 2 ** -11),
    ("aten.tanh.default", (), (-30, 30), _f64(np.tanh), 1e-6),
    ("aten.hardswish.default", (), (-6, 6), _f64(lambda x: x * np.clip(x + 3, 0, 6) / 6), 0),
    ("aten.hardtanh.default", (-1.0, 2.0), (-6, 6), _f64(lambda x: np.clip(x, -1, 2)), 0),
    ("aten.leaky_relu.default", (0.2,), (-6, 6), _f64(lambda x: np.where(x > 0, x, 0.2 * x)),
     0),
    ("aten.pow.Tensor_Scalar", (2.0,), (-3, 3), _f64(np.square), 0),        # x * x
    ("aten.pow.Tensor_Scalar", (3,), (-3, 3), _f64(lambda x: x ** 3), 0),   # Int exponent
    ("aten.pow.Tensor_Scalar", (0.5,), (0, 9), _f64(np.sqrt), 1e-6),
    ("aten.pow.Tensor_Scalar", (-0.5,), (0.1, 9), _f64(lambda x: x ** -0.5), 1e-6),
    ("aten.pow.Tensor_Scalar", (-1.0,), (0.1, 9), _f64(lambda x: 1 / x), 1e-6),
    ("aten.pow.Tensor_Scalar", (-2.0,), (0.1, 9), _f64(lambda x: 1 / (x * x)), 1e-6),
    ("aten.pow.Tensor_Scalar", (1.7,), (0, 9), _f64(lambda x: x ** 1.7), 1e-5),
    ("aten.pow.Tensor_Scalar", (5.0,), (-3, 3), _f64(lambda x: x ** 5), 1e-5),  # odd, general
    ("aten.pow.Tensor_Scalar", (0,), (-3, 3), _f64(np.ones_like), 0),
]


@pytest.mark.parametrize("shape", [(5, 13), (1,)], ids=str)
@pytest.mark.parametrize("name,extra,span,exact,atol", MATH_CASES,
                         ids=[f"{c[0].split('.')[1]}{c[1]}" for c in MATH_CASES])
def test_unary_math_f32(gpu, rng, name, extra, span, exact, atol, shape):
    g, blob = _graph(name, shape, extra)
    x = rng.uniform(*span, shape).astype(np.float32)
    x.flat[0] = span[0] if span[0] > 0 else 0.0    # 0 (or the smallest positive input)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, exact(x).astype(np.float32), rel=1e-5, atol=2e-6, rtol=2e-6,
                 what="reference vs float64 formula")
    assert_close(out, ref, rel=1e-5, atol=atol, rtol=4e-6, exact=not atol, what=name)


def test_pow_scalar_general_follows_torch_special_cases(gpu):
    """A fractional exponent of a negative base is NaN, of zero 0 (positive) or inf."""
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 7.0, -0.0], np.float32)
    for e in (1.5, -1.5):
        g, blob = _graph("aten.pow.Tensor_Scalar", x.shape, (e,))
        (out,), (ref,) = run_graph_both(g, blob, [x])
        with np.errstate(all="ignore"):
            expect = np.power(x.astype(np.float64), e)   # NaN for negative bases, as torch
        for arr in (out, ref):   # NaN and inf exactly where torch has them
            special = ~np.isfinite(expect)
            assert (np.isnan(arr) == np.isnan(expect)).all(), (e, arr, expect)
            assert (arr[special & ~np.isnan(expect)] == np.inf).all(), (e, arr, expect)
        ok = np.isfinite(expect)
        assert_close(ref[ok], expect[ok].astype(np.float32), rel=1e-6, what="reference")
        assert_close(out[ok], ref[ok], rel=1e-5, atol=0, rtol=1e-5, what=f"pow {e}")


@pytest.mark.parametrize("name,extra,dtype,exact", [
    ("aten.abs.default", (), np.int32, np.abs),
    ("aten.neg.default", (), np.int32, np.negative),
    ("aten.neg.default", (), np.int8, np.negative),          # packed, wraps like torch
    ("aten.pow.Tensor_Scalar", (3,), np.int32, lambda x: x ** 3),
    ("aten.pow.Tensor_Scalar", (0,), np.int32, np.ones_like),
])
def test_unary_math_int_exact(gpu, rng, name, extra, dtype, exact):
    shape = (3, 7)
    g, blob = _graph(name, shape, extra, dtype, dtype)
    lim = 127 if dtype == np.int8 else 1000
    x = rng.integers(-lim, lim, shape, endpoint=True).astype(dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, exact(x).astype(dtype), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("extra,match", [((0.5,), "integer pow with exponent 0.5"),
                                         ((-1,), "integer pow with exponent -1")])
def test_int_pow_scalar_unsupported(extra, match):
    g, _ = _graph("aten.pow.Tensor_Scalar", (4,), extra, np.int32, np.int32)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(g)


def test_sin_cos_are_webpte_polynomials_accurate_to_a_few_ulp(gpu):
    """sin/cos do not use WGSL's builtins (bounded only to 2^-11 absolute; SwiftShader is that
    coarse): webpte's own reduction + polynomial, within 2.5e-7 absolute of float64 on the GPU
    and in the reference, quarter-turn boundaries and large arguments included."""
    x = np.concatenate([np.linspace(-40, 40, 20001), np.pi / 4 * np.arange(-16, 17),
                        [1e3, -1e3, 12345.678, 0.0, -0.0, 1e-30]]).astype(np.float32)
    for name, f in (("aten.sin.default", np.sin), ("aten.cos.default", np.cos)):
        g, blob = _graph(name, x.shape)
        (out,), (ref,) = run_graph_both(g, blob, [x])
        exact = f(x.astype(np.float64))
        for arr, what in ((out, "gpu"), (ref, "reference")):
            err = np.abs(arr.astype(np.float64) - exact)
            worst = int(np.argmax(err))
            assert err.max() <= 2.5e-7, f"{name} {what}: x={x[worst]} err {err[worst]:.2e}"
