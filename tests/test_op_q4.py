"""4-bit weight linears: linear_qcs4w (f32 activations) and linear_dq8ca_q4gsw (dynamically
quantized int8 activations, exact int32 accumulators)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.plan import lower
from webpte.pte.builder import GraphBuilder

QCS4W = "et_vk.linear_qcs4w.default"


def pack_high_first(w):
    """The exporter's qcs4w packing, written independently: (even + 8) << 4 | (odd + 8)."""
    u = (w.astype(np.int16) + 8).astype(np.uint8)
    return (u[:, 0::2] << 4) | u[:, 1::2]


def qcs4w_graph(rng, lead, k, n):
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w.flat[:2] = [-8, 7][: w.size]
    scales = (rng.random(n).astype(np.float32) + 0.5) * np.float32(0.01)
    b = GraphBuilder()
    x = b.tensor(np.float32, lead + (k,))
    o = b.tensor(np.float32, lead + (n,))
    b.op(QCS4W, x, b.constant(pack_high_first(w)), b.constant(scales), o)
    graph, blob = b.build([x], [o])
    return graph, blob, w, scales


@pytest.mark.parametrize("lead,k,n", [
    ((1,), 32, 16),      # the catalog's gemv
    ((4,), 32, 16),      # word-aligned rows, one row block
    ((5,), 18, 7),       # rows of 9 bytes (byte path), a partial row block
    ((2, 9), 64, 70),    # leading dims, two workgroups of columns, several row blocks
    ((1,), 2, 1),        # size-1 dims
])
def test_qcs4w(gpu, rng, lead, k, n):
    graph, blob, w, scales = qcs4w_graph(rng, lead, k, n)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    # The fake-quant linear the golden comes from: x @ (w * scale).T in float64.
    expect = x.astype(np.float64) @ (w.astype(np.float64) * scales[:, None]).T
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs dequantized W")
    assert_close(out, ref, rel=1e-5, what="linear_qcs4w")


def test_qcs4w_bad_shapes():
    b = GraphBuilder()
    x, o = b.tensor(np.float32, (2, 31)), b.tensor(np.float32, (2, 4))
    b.op(QCS4W, x, b.constant(np.zeros((4, 16), np.uint8)),
         b.constant(np.ones(4, np.float32)), o)
    with pytest.raises(UnsupportedOpError, match="K = 31"):
        lower(b.build([x], [o])[0])
    b = GraphBuilder()
    x, o = b.tensor(np.float32, (2, 32)), b.tensor(np.float32, (2, 4))
    b.op(QCS4W, x, b.constant(np.zeros((4, 16), np.uint8)),
         b.constant(np.ones(4, np.int32)), o)
    with pytest.raises(PlanError, match="float32 tensor"):
        lower(b.build([x], [o])[0])
