"""torchao.choose_qparams_affine: per-block scale and zero point equal torch's bit for bit."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

CHOOSE = "torchao.choose_qparams_affine.default"


def qparams_graph(shape, block, mapping="ASYMMETRIC", qmin=-128, qmax=127, zp_dtype=np.int8,
                  eps=None):
    b = GraphBuilder()
    x = b.tensor(np.float32, shape)
    n_blocks = int(np.prod(shape) // np.prod(block))
    s, z = b.tensor(np.float32, (n_blocks,)), b.tensor(zp_dtype, (n_blocks,))
    b.op(CHOOSE, x, b.scalar(mapping), b.scalar(list(block)), b.scalar(None), b.scalar(qmin),
         b.scalar(qmax), b.scalar(eps), b.scalar(None), b.scalar(None), b.scalar(False),
         b.value_list([s, z]))
    return b.build([x], [s, z])


def torch_formula(x, block, mapping, qmin, qmax, eps=2.0 ** -126):
    """torchao's _choose_qparams_affine written independently: float64 steps, each rounded
    to f32 (one f64 op then one rounding equals the f32 op for + - * /)."""
    r = lambda v: np.float64(np.float32(v))  # noqa: E731
    rows = x.reshape(-1, int(np.prod(block))).astype(np.float64)
    scales, zps = [], []
    for row in rows:
        mn, mx = min(row.min(), 0.0), max(row.max(), 0.0)
        if mapping == "ASYMMETRIC":
            s = max(r(r(mx - mn) / (qmax - qmin)), r(eps))
            z = min(max(qmin - np.round(r(mn / s)), qmin), qmax)
        else:
            s = max(r(max(-mn, mx) / ((qmax - qmin) / 2)), r(eps))
            z = int((qmax + qmin + 1) / 2)
        scales.append(s)
        zps.append(z)
    return np.array(scales, np.float32), np.array(zps)


@pytest.mark.parametrize("shape,block,mapping,qmin,qmax,zp_dtype", [
    ((3, 40), (1, 40), "ASYMMETRIC", -128, 127, np.int8),     # per row (the catalog's form)
    ((7, 9), (7, 9), "ASYMMETRIC", -128, 127, np.int8),       # per tensor, one block
    ((2, 64), (1, 16), "ASYMMETRIC", -128, 127, np.int8),     # groups of a row, 8 blocks
    ((5, 1031), (1, 1031), "ASYMMETRIC", -128, 127, np.int8),  # blocks longer than 4x256
    ((2, 3, 8), (1, 1, 8), "ASYMMETRIC", 0, 255, np.uint8),   # uint8 zero points, rank 3
    ((6, 11), (1, 11), "SYMMETRIC", -128, 127, np.int8),
    ((4, 5), (1, 5), "ASYMMETRIC", -8, 7, np.int32),          # int32 zero points
])
def test_choose_qparams(gpu, rng, shape, block, mapping, qmin, qmax, zp_dtype):
    graph, blob = qparams_graph(shape, block, mapping, qmin, qmax, zp_dtype)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(3)
    x.reshape(-1, int(np.prod(block)))[0] = np.abs(x.reshape(-1, int(np.prod(block)))[0])
    (s, z), (rs, rz) = run_graph_both(graph, blob, [x])
    es, ez = torch_formula(x, block, mapping, qmin, qmax)
    assert_close(rs, es, exact=True, what="reference scale vs torch formula")
    assert_close(rz.astype(np.int64), ez.astype(np.int64), exact=True, what="reference zp")
    assert_close(s, rs, exact=True, what="scale")
    assert_close(z, rz, exact=True, what="zero point")


def test_choose_qparams_divisions_exact(gpu, rng):
    # Pairs (a < 0 < b) over 60 decades: scale = (b - a) / 255 and a / scale exercise the
    # kernel's correctly rounded division across exponents; a zero block gives scale = eps.
    n = 2000
    a = -(10.0 ** rng.uniform(-30, 30, n)).astype(np.float32)
    b = (10.0 ** rng.uniform(-30, 30, n)).astype(np.float32)
    x = np.stack([a, b], 1)
    x[0] = 0
    graph, blob = qparams_graph((n, 2), (1, 2))
    (s, z), (rs, rz) = run_graph_both(graph, blob, [x])
    es, ez = torch_formula(x, (1, 2), "ASYMMETRIC", -128, 127)
    assert s[0] == np.float32(2.0 ** -126)
    assert_close(rs, es, exact=True, what="reference scale vs torch formula")
    assert_close(s, rs, exact=True, what="scale")
    assert_close(z.astype(np.int64), ez.astype(np.int64), exact=True, what="zero point")


@pytest.mark.parametrize("block,mapping,match", [
    ((1, 6), "SYMMETRIC_NO_CLIPPING_ERR", "mapping type"),
    ((4, 4), "ASYMMETRIC", "does not tile"),
    ((2, 1), "ASYMMETRIC", "must be contiguous"),
])
def test_choose_qparams_unsupported(block, mapping, match):
    graph, _ = qparams_graph((4, 6), block, mapping)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(graph)
