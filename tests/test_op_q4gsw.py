"""Weight-only 4-bit group-wise ops: et_vk.linear_q4gsw (f32 activations) and
et_vk.embedding_q4gsw (a token table), GPU against the reference and the reference against
the dequantized-weight formulas their definitions give, with weights packed here the way
ExecuTorch's exporter packs them (written independently)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

LINEAR = "et_vk.linear_q4gsw.default"
EMBEDDING = "et_vk.embedding_q4gsw.default"


def pack_exporter(w, pad_to=8):
    """`pack_4bit_weight_tensor`: K padded with zeros to a multiple of `pad_to`, then byte j
    = (w[2j+1] + 8) << 4 | (w[2j] + 8)."""
    n, k = w.shape
    kp = -(-k // pad_to) * pad_to
    u = np.full((n, kp), 8, np.uint8)
    u[:, :k] = (w.astype(np.int16) + 8).astype(np.uint8)
    return (u[:, 1::2] << 4) | u[:, 0::2]


def q4gsw_weights(rng, n, k, gs, scale_rows=None):
    """w (N, K) in [-8, 7]; scales (G, N4) transposed and padded to 4 columns like the
    exporter (`align_width_and_update_state_dict`), the padding poisoned with NaN."""
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w.flat[:2] = [-8, 7][: w.size]
    g = scale_rows or -(-k // gs)
    n4 = -(-n // 4) * 4
    scales = np.full((g, n4), np.nan, np.float32)
    scales[:, :n] = rng.random((g, n)) * 0.02 + 0.005
    return w, scales


def linear_graph(w, scales, gs, lead, *, bias=None, pad_to=8):
    n, k = w.shape
    b = GraphBuilder()
    x = b.tensor(np.float32, lead + (k,))
    o = b.tensor(np.float32, lead + (n,))
    b.op(LINEAR, x, b.constant(pack_exporter(w, pad_to)), b.constant(scales), b.scalar(gs),
         b.scalar(None) if bias is None else b.constant(bias), o)
    return b.build([x], [o])


def dequantized_linear(x, w, scales, gs, bias):
    """x @ (w * scales[k // gs, n]).T + bias in float64: the op's definition."""
    k = w.shape[1]
    wd = w.astype(np.float64) * scales[np.arange(k) // gs, : w.shape[0]].T
    y = x.reshape(-1, k).astype(np.float64) @ wd.T
    return y if bias is None else y + bias[: w.shape[0]]


LINEARS = [
    ((1,), 64, 16, 32, False),      # decode: one row, word path
    ((4,), 64, 16, 32, True),       # one full row block
    ((7,), 40, 13, 8, True),        # five groups of 8, N not a multiple of 4, a partial block
    ((2, 3), 96, 70, 32, False),    # leading dims, two workgroups of columns
    ((5,), 37, 11, 16, True),       # prime K: exporter pads to 40, a partial last group
    ((3,), 18, 5, 6, False),        # group size not a multiple of 8: byte path
    ((1,), 2, 1, 2, False),         # size-1 dims
    ((1, 1, 1), 8, 3, 8, True),     # rank 4, one group
]


@pytest.mark.parametrize("lead,k,n,gs,bias", LINEARS, ids=[str(c) for c in LINEARS])
def test_linear_q4gsw(gpu, rng, lead, k, n, gs, bias):
    w, scales = q4gsw_weights(rng, n, k, gs)
    bias_arr = rng.standard_normal(-(-n // 4) * 4).astype(np.float32) if bias else None
    graph, blob = linear_graph(w, scales, gs, lead, bias=bias_arr)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    expect = dequantized_linear(x, w, scales, gs, bias_arr).reshape(ref.shape)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, atol=1e-6, rtol=1e-4,
                 what="reference vs dequantized W")
    assert_close(out, ref, rel=1e-5, atol=1e-5, rtol=1e-3, what="linear_q4gsw")


def test_linear_q4gsw_debug_case(gpu):
    # x = 1..K, w = +1/-1 alternating, scale 0.5 in group 0 and 2 in group 1: exact sums.
    k, n, gs = 16, 3, 8
    w = np.tile(np.array([1, -1], np.int8), (n, k // 2))
    w[1] = 7
    w[2] = -8
    scales = np.array([[0.5] * 4, [2.0] * 4], np.float32)
    graph, blob = linear_graph(w, scales, gs, (2,))
    x = np.stack([np.arange(1, k + 1), -np.arange(1, k + 1)]).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    row = [0.5 * -4 + 2.0 * -4, 0.5 * 7 * 36 + 2.0 * 7 * 100, 0.5 * -8 * 36 + 2.0 * -8 * 100]
    expect = np.array([row, [-v for v in row]], np.float32)
    assert_close(ref, expect, exact=True, what="reference debug case")
    assert_close(out, expect, exact=True, what="linear_q4gsw debug case")


def test_linear_q4gsw_refuses_short_tables():
    w = np.zeros((4, 32), np.int8)
    scales = np.ones((3, 4), np.float32)
    graph, _ = linear_graph(w, scales, 8, (2,))    # 4 groups of 8, 3 scale rows
    with pytest.raises(UnsupportedOpError, match=r"weight scales \[3, 4\] should be \[>= 4"):
        lower(graph)
    b = GraphBuilder()
    x, o = b.tensor(np.float32, (2, 40)), b.tensor(np.float32, (2, 4))
    b.op(LINEAR, x, b.constant(np.zeros((4, 16), np.uint8)), b.constant(scales), b.scalar(8),
         b.scalar(None), o)
    with pytest.raises(UnsupportedOpError, match="fewer than K = 40"):
        lower(b.build([x], [o])[0])


# -- embedding_q4gsw ----------------------------------------------------------------------

def pack_embedding(w, linear):
    """The two packings: linear (even d low, what the exporter writes) or
    quantized_decomposed.embedding_4bit's (even d high)."""
    u = (w.astype(np.int16) + 8).astype(np.uint8)
    even, odd = u[:, 0::2], u[:, 1::2]
    return (odd << 4) | even if linear else (even << 4) | odd


def embedding_graph(w, scales, gs, ishape, linear, idtype=np.int64):
    v, d = w.shape
    b = GraphBuilder()
    i = b.tensor(idtype, ishape)
    o = b.tensor(np.float32, ishape + (d,))
    b.op(EMBEDDING, b.constant(pack_embedding(w, linear)), b.constant(scales), b.scalar(gs),
         i, b.scalar(linear), o)
    return b.build([i], [o])


EMBEDDINGS = [
    (11, 32, 32, (5,), True),       # the exporter's form: D a multiple of 32, one group
    (13, 64, 16, (2, 7), True),     # four groups, 2-d indices
    (7, 14, 7, (3,), False),        # embedding_4bit packing, odd group size, D not % 4
    (1, 2, 2, (1,), True),          # size-1 everything
    (97, 40, 8, (300,), False),     # more than one workgroup of outputs
]


@pytest.mark.parametrize("v,d,gs,ishape,linear", EMBEDDINGS, ids=[str(c) for c in EMBEDDINGS])
def test_embedding_q4gsw(gpu, rng, v, d, gs, ishape, linear):
    w = rng.integers(-8, 8, (v, d)).astype(np.int8)
    w.flat[:2] = [-8, 7]
    scales = (rng.random((v, d // gs)) * 0.02 + 0.005).astype(np.float32)
    graph, blob = embedding_graph(w, scales, gs, ishape, linear)
    idx = rng.integers(0, v, ishape).astype(np.int64)
    (out,), (ref,) = run_graph_both(graph, blob, [idx])
    table = w.astype(np.float32) * np.repeat(scales, gs, axis=1)
    assert_close(ref, table[idx], exact=True, what="reference vs dequantized table")
    assert_close(out, ref, exact=True, what="embedding_q4gsw")


def test_embedding_q4gsw_clamps_indices(gpu, rng):
    w = rng.integers(-8, 8, (5, 8)).astype(np.int8)
    scales = np.ones((5, 1), np.float32)
    graph, blob = embedding_graph(w, scales, 8, (4,), True, np.int32)
    (out,), (ref,) = run_graph_both(graph, blob, [np.array([-3, 0, 4, 9], np.int32)])
    expect = w[[0, 0, 4, 4]].astype(np.float32)
    assert_close(ref, expect, exact=True, what="clamped reference")
    assert_close(out, expect, exact=True, what="clamped embedding_q4gsw")


def test_embedding_q4gsw_bad_scales():
    graph, _ = embedding_graph(np.zeros((5, 16), np.int8), np.ones((5, 3), np.float32), 8,
                               (2,), True)
    with pytest.raises(UnsupportedOpError, match=r"weight scales \[5, 3\] with group size 8"):
        lower(graph)
    b = GraphBuilder()
    i, o = b.tensor(np.int64, (2,)), b.tensor(np.float32, (2, 8))
    b.op(EMBEDDING, b.constant(np.zeros((5, 8), np.uint8)), b.constant(np.ones((5, 2),
         np.float32)), b.scalar(8), i, b.scalar(True), o)
    with pytest.raises(PlanError, match="gives dims"):
        lower(b.build([i], [o])[0])
