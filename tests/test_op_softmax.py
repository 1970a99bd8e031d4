"""aten._softmax.default and aten._log_softmax.default: last and middle dims, long rows,
size-1 dims, unsupported forms."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _graph(shape, dim, half_to_float=False, dtype=np.float32, op="aten._softmax.default"):
    g = GraphBuilder()
    x, o = g.tensor(dtype, shape), g.tensor(dtype, shape)
    g.op(op, x, g.scalar(dim), g.scalar(half_to_float), o)
    return g.build([x], [o])


def _softmax64(x, dim):
    # Independent formula: float64 throughout, max subtracted for stability.
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("shape,dim", [
    ((3, 7, 33), -1),        # last dim, odd
    ((3, 7, 33), 1),         # middle dim: strided rows
    ((2, 1029, 5), 1),       # long middle row (> workgroup) with inner stride 5
    ((4, 1029), -1),         # long last-dim row
    ((5, 1), -1),            # rows of one element
    ((1, 9, 1, 3), 0),       # size-1 softmax dim over leading axis
    ((2, 3, 1024), 2),       # attention-sized rows
    ((7,), 0),               # 1-D
])
def test_softmax(gpu, rng, shape, dim):
    graph, blob = _graph(shape, dim)
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert_close(ref, _softmax64(x, dim).astype(np.float32), rel=1e-6, what="reference vs f64")
    assert_close(out, ref, rel=1e-5, what="softmax")


def _log_softmax64(x, dim):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


@pytest.mark.parametrize("shape,dim", [
    ((3, 7, 33), -1),
    ((3, 7, 33), 1),         # strided rows
    ((2, 1029, 5), 1),       # long strided row
    ((5, 1), -1),            # rows of one element: 0
])
def test_log_softmax(gpu, rng, shape, dim):
    graph, blob = _graph(shape, dim, op="aten._log_softmax.default")
    x = (3 * rng.standard_normal(shape) + 200).astype(np.float32)  # exp(200) overflows f32
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert_close(ref, _log_softmax64(x, dim).astype(np.float32), rel=1e-6,
                 what="reference vs f64")
    assert_close(out, ref, rel=1e-5, atol=1e-5, rtol=1e-5, what="log_softmax")


def test_softmax_large_values_are_stable(gpu, rng):
    shape = (6, 300)
    graph, blob = _graph(shape, -1)
    x = (rng.standard_normal(shape) * 50 + 500).astype(np.float32)  # exp(500) overflows f32
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert np.isfinite(out).all()
    assert_close(out, ref, rel=1e-5, what="softmax of large values")
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)


def test_softmax_many_rows_fold_into_a_2d_grid(gpu, rng):
    shape = (70000, 2)  # more rows (workgroups) than one grid dimension holds
    graph, blob = _graph(shape, -1)
    x = rng.standard_normal(shape).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert_close(out, ref, rel=1e-5, what="softmax, 70000 rows")


def test_half_to_float_is_unsupported():
    graph, _ = _graph((2, 3), -1, half_to_float=True)
    with pytest.raises(UnsupportedOpError, match="half_to_float"):
        lower(graph)


def test_int_softmax_is_unsupported():
    graph, _ = _graph((2, 3), -1, dtype=np.int32)
    with pytest.raises(UnsupportedOpError, match="float32 only"):
        lower(graph)
