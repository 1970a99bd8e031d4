"""aten.max.dim / aten.min.dim in the portable out form (values and int64 indices): GPU vs
the numpy reference vs a plain loop, exactly, on f32 (ties, NaN) and int64/int32, keepdim
both ways; typed errors of unsupported and malformed forms."""

from __future__ import annotations

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _graph(op, dtype, dims, dim, keepdim, out_dims, values_dtype=None):
    b = GraphBuilder()
    x = b.tensor(dtype, dims)
    v = b.tensor(values_dtype or dtype, out_dims)
    i = b.tensor(np.int64, out_dims)
    b.op(f"aten.{op}.dim_{op}", x, b.scalar(dim), b.scalar(keepdim), v, i, b.value_list([v, i]))
    return b.build([x], [v, i])


def _loop(op, x, dim, keepdim):
    """First NaN, else the first of equal extremes, along `dim`."""
    moved = np.moveaxis(x, dim, -1)
    values = np.empty(moved.shape[:-1], x.dtype)
    at = np.empty(moved.shape[:-1], np.int64)
    for k in np.ndindex(*moved.shape[:-1]):
        row = moved[k]
        best = 0
        for r in range(1, len(row)):
            if np.isnan(row[best]) if x.dtype.kind == "f" else False:
                break
            if (x.dtype.kind == "f" and np.isnan(row[r])) or \
                    (row[r] > row[best] if op == "max" else row[r] < row[best]):
                best = r
        values[k], at[k] = row[best], best
    if keepdim:
        values, at = np.expand_dims(values, dim), np.expand_dims(at, dim)
    return values, at


CASES = [
    ("max", np.int64, (1, 27), -1, True),     # the Gemma 4 pooler's max_x
    ("max", np.float32, (3, 7, 5), 1, False),
    ("min", np.float32, (3, 7, 5), 1, True),
    ("min", np.int32, (9, 2), 0, False),
    ("max", np.float32, (13,), 0, False),
]


@pytest.mark.parametrize("op,dtype,dims,dim,keepdim", CASES, ids=[str(c) for c in CASES])
def test_max_min_dim(gpu, rng, op, dtype, dims, dim, keepdim):
    if dtype == np.float32:
        x = np.round(rng.standard_normal(dims) * 2).astype(dtype)   # rounded: ties
        if len(dims) == 3:
            x[1, 4, 2] = np.nan
            x[2, 2, 0] = x[2, 5, 0] = np.nan
    else:
        x = rng.integers(-5, 6, dims).astype(dtype)
    want_v, want_i = _loop(op, x, dim, keepdim)
    g, blob = _graph(op, dtype, dims, dim, keepdim, want_v.shape)
    (v, i), (rv, ri) = run_graph_both(g, blob, [x])
    assert np.array_equal(rv, want_v, equal_nan=True), "reference values vs the loop"
    assert_close(ri, want_i, exact=True, what="reference indices vs the loop")
    assert np.array_equal(v, rv, equal_nan=True), f"GPU values {v} vs reference {rv}"
    assert_close(i, ri, exact=True, what=f"{op}.dim indices GPU vs reference")


def test_unsupported_and_malformed_forms():
    g, _ = _graph("max", np.int8, (4, 6), 1, False, (4,))
    with pytest.raises(UnsupportedOpError, match="int8"):
        lower(g)
    g, _ = _graph("max", np.float32, (4, 6), 1, False, (4, 1))
    with pytest.raises(PlanError, match=r"gives \[4\]"):
        lower(g)
