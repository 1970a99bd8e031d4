"""aten.index.Tensor (advanced indexing by a list of index tensors, Nulls for whole dims):
GPU vs the numpy reference vs numpy's own indexing, exactly, on f32, i32, bool and packed
int8; adjacent indexed dims (broadcast dims in place) and non-adjacent ones (broadcast dims
first); negative indices; typed errors of unsupported and malformed forms."""

from __future__ import annotations

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _graph(x_dtype, x_dims, index_dims, out_dims, index_dtype=np.int64):
    """x[i0, i1, ...]; `index_dims` entries None for a Null (a whole dim)."""
    b = GraphBuilder()
    x = b.tensor(x_dtype, x_dims)
    idx = [None if d is None else b.tensor(index_dtype, d) for d in index_dims]
    lst = b.value_list([b.scalar(None) if i is None else i for i in idx])
    o = b.tensor(x_dtype, out_dims)
    b.op("aten.index.Tensor", x, lst, o)
    return b.build([x] + [i for i in idx if i is not None], [o])


CASES = [
    # x dims, index dims (None: Null), dtype
    ((3, 5, 7), [None, (4,)], np.float32),                  # one dim, adjacent
    ((1, 27), [(1, 1, 1, 1), (1, 1, 1, 27)], np.bool_),     # Gemma 4's padding-mask lookup
    ((4, 3, 6), [(2, 5), None, (5,)], np.int32),            # not adjacent: broadcast first
    ((5, 9), [(3, 1), (1, 4)], np.int8),                    # broadcast together, packed
    ((2, 6, 5, 3), [None, (7,), (7,)], np.float32),         # two adjacent, trailing plain dim
]


@pytest.mark.parametrize("x_dims,index_dims,dtype", CASES, ids=[str(c[:2]) for c in CASES])
def test_index_tensor(gpu, rng, x_dims, index_dims, dtype):
    if dtype == np.bool_:
        x = rng.integers(0, 2, x_dims).astype(bool)
    elif dtype == np.float32:
        x = rng.standard_normal(x_dims).astype(dtype)
    else:
        x = rng.integers(-100, 100, x_dims).astype(dtype)
    # In-range indices, negative ones too (counted from the end)
    idx = [None if d is None else rng.integers(-x_dims[k], x_dims[k], d).astype(np.int64)
           for k, d in enumerate(index_dims)]
    want = x[tuple(slice(None) if i is None else i for i in idx)]
    g, blob = _graph(dtype, x_dims, index_dims, want.shape)
    (out,), (ref,) = run_graph_both(g, blob, [x] + [i for i in idx if i is not None])
    assert_close(ref, want, exact=True, what="reference vs numpy indexing")
    assert_close(out, ref, exact=True, what="index.Tensor GPU vs reference")


def test_out_of_range_indices_clamp(gpu, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    i = np.array([-9, 0, 3, 11], np.int64)
    g, blob = _graph(np.float32, (4, 6), [(4,)], (4, 6))
    (out,), (ref,) = run_graph_both(g, blob, [x, i])
    assert_close(ref, x[[0, 0, 3, 3]], exact=True, what="reference clamps")
    assert_close(out, ref, exact=True, what="GPU clamps")


def test_unsupported_and_malformed_forms():
    g, _ = _graph(np.float32, (4, 6), [(4,)], (4, 6), index_dtype=np.bool_)
    with pytest.raises(UnsupportedOpError, match="boolean masks"):
        lower(g)
    g, _ = _graph(np.float32, (4, 6), [(3,)], (4, 6))
    with pytest.raises(PlanError, match=r"gives dims \[3, 6\]"):
        lower(g)
    g, _ = _graph(np.float32, (4, 6), [(3,), (2,)], (3, 6))
    with pytest.raises(PlanError, match="do not broadcast"):
        lower(g)
