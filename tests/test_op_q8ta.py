"""et_vk.q8ta_add / q8ta_relu / q8ta_pixel_shuffle: int8 through f32, exact int8 outputs."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

ADD = "et_vk.q8ta_add.default"
RELU = "et_vk.q8ta_relu.default"
PIXEL_SHUFFLE = "et_vk.q8ta_pixel_shuffle.default"
SHAPES = [(3, 7, 5), (1,), (1, 1, 13), (37, 29)]  # odd, size-1 dims, > one workgroup of words


def int8(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def q64(y, scale, zp):
    """Quantize float64 values: round half to even, clamp (the torch formula in f64)."""
    return np.clip(np.round(y / scale) + zp, -128, 127)


def near_tie(y, scale):
    """Where f32 and f64 arithmetic may round differently: within 1e-4 of a .5 boundary."""
    t = y / scale
    return np.abs(np.abs(t - np.floor(t)) - 0.5) < 1e-4


def check_against_f64(ref, want, y, scale):
    """ref equals the float64 formula except, by one step, next to a rounding boundary."""
    diff = np.abs(ref.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1
    assert not (diff.astype(bool) & ~near_tie(y, scale)).any(), "reference vs float64 formula"


def add_graph(shape, qa, qb, qo, alpha):
    b = GraphBuilder()
    x, y, o = b.tensor(np.int8, shape), b.tensor(np.int8, shape), b.tensor(np.int8, shape)
    b.op(ADD, x, y, *[b.scalar(v) for v in (*qa, *qb, *qo, alpha)], o)
    return b.build([x, y], [o])


def unary_graph(name, in_shape, out_shape, extra, in_dtype=np.int8):
    b = GraphBuilder()
    x, o = b.tensor(in_dtype, in_shape), b.tensor(np.int8, out_shape)
    b.op(name, x, *[b.scalar(v) for v in extra], o)
    return b.build([x], [o])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("qa,qb,qo,alpha", [
    ((0.05, 0), (0.1, 3), (0.08, -2), 1.0),
    ((0.0123, 5), (0.031, -4), (0.05, 7), 2.0),
    ((0.2, -128), (0.01, 127), (0.0173, 0), -0.75),
])
def test_add(gpu, rng, shape, qa, qb, qo, alpha):
    g, blob = add_graph(shape, qa, qb, qo, alpha)
    a, b = int8(rng, shape), int8(rng, shape)
    (out,), (ref,) = run_graph_both(g, blob, [a, b])
    y = (a.astype(np.float64) - qa[1]) * qa[0] + alpha * (b.astype(np.float64) - qb[1]) * qb[0]
    check_against_f64(ref, q64(y, *qo), y, qo[0])
    assert_close(out, ref, exact=True, what="q8ta_add")


def test_add_ties_round_half_even(gpu):
    # scale 0.5 and output scale 1: odd a lands on k + 0.5 exactly in f32.
    a = np.arange(-128, 128, dtype=np.int8)
    b = np.zeros_like(a)
    g, blob = add_graph(a.shape, (0.5, 0), (1.0, 0), (1.0, 3), 1.0)
    (out,), (ref,) = run_graph_both(g, blob, [a, b])
    want = np.round(a / 2) + 3  # numpy rounds half to even
    assert_close(ref, want.astype(np.int8), exact=True, what="reference ties")
    assert_close(out, ref, exact=True, what="ties")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("qx,qo", [((0.05, -3), (0.05, -3)), ((0.05, 10), (0.08, 5)),
                                   ((0.013, -128), (0.0071, -20))])
def test_relu(gpu, rng, shape, qx, qo):
    g, blob = unary_graph(RELU, shape, shape, (*qx, *qo))
    x = int8(rng, shape)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    y = np.maximum((x.astype(np.float64) - qx[1]) * qx[0], 0)
    check_against_f64(ref, q64(y, *qo), y, qo[0])
    assert_close(out, ref, exact=True, what="q8ta_relu")


def pixel_shuffle64(x, r):
    """Independent pixel shuffle: out[.., c, h*r + i, w*r + j] = x[.., c*r*r + i*r + j, h, w]."""
    *lead, crr, h, w = x.shape
    c = crr // (r * r)
    out = np.empty((*lead, c, h * r, w * r), x.dtype)
    for i in range(r):
        for j in range(r):
            out[..., i::r, j::r] = x[..., i * r + j::r * r, :, :]
    return out


@pytest.mark.parametrize("in_shape,r", [((1, 4, 2, 2), 2), ((2, 8, 3, 5), 2),
                                        ((1, 9, 2, 3), 3), ((3, 18, 7, 1), 3),
                                        ((4, 3, 5), 1), ((2, 16, 9, 11), 4)], ids=str)
@pytest.mark.parametrize("qx,qo", [((0.05, -3), (0.05, -3)), ((0.05, 10), (0.08, 5))])
def test_pixel_shuffle(gpu, rng, in_shape, r, qx, qo):
    *lead, crr, h, w = in_shape
    out_shape = (*lead, crr // (r * r), h * r, w * r)
    g, blob = unary_graph(PIXEL_SHUFFLE, in_shape, out_shape, (qx[0], qx[1], 1 / qo[0],
                                                               qo[1], r))
    x = int8(rng, in_shape)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    y = pixel_shuffle64((x.astype(np.float64) - qx[1]) * qx[0], r)
    check_against_f64(ref, q64(y, *qo), y, qo[0])
    if qx == qo:  # same quantization: a pure byte shuffle
        assert_close(ref, pixel_shuffle64(x, r), exact=True, what="byte shuffle")
    assert_close(out, ref, exact=True, what="q8ta_pixel_shuffle")


def test_unsupported_forms():
    g, _ = unary_graph(RELU, (4,), (4,), (0.1, 0, 0.1, 0), in_dtype=np.uint8)
    with pytest.raises(UnsupportedOpError, match="int8 only"):
        lower(g)
    g, _ = unary_graph(RELU, (4,), (4,), (0.1, 200, 0.1, 0))
    with pytest.raises(UnsupportedOpError, match="zero point 200"):
        lower(g)
    b = GraphBuilder()
    x, y, o = b.tensor(np.int8, (4, 3)), b.tensor(np.int8, (3,)), b.tensor(np.int8, (4, 3))
    b.op(ADD, x, y, *[b.scalar(v) for v in (0.1, 0, 0.1, 0, 0.1, 0, 1.0)], o)
    with pytest.raises(UnsupportedOpError, match="no broadcasting"):
        lower(b.build([x, y], [o])[0])
    g, _ = unary_graph(PIXEL_SHUFFLE, (1, 6, 2, 2), (1, 1, 4, 4), (0.1, 0, 10.0, 0, 2))
    with pytest.raises(UnsupportedOpError, match="divisible by r"):
        lower(g)
    g, _ = unary_graph(PIXEL_SHUFFLE, (1, 8, 2, 2), (1, 2, 4, 5), (0.1, 0, 10.0, 0, 2))
    with pytest.raises(PlanError, match="gives dims"):
        lower(g)
    g, _ = unary_graph(RELU, (4,), (4,), (0.1, 0, 0.0, 0))
    with pytest.raises(PlanError, match="scale must be positive"):
        lower(g)
