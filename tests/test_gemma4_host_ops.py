"""Units of kernels/host_ops/ (the ops a Gemma 4 method runs outside the catalog families):
GPU vs the numpy reference vs independent numpy formulas, exact where the result is integer
or a copy; typed errors of unsupported forms."""

from __future__ import annotations

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _one(name, ins, out, scalars_after=(), scalars_before=()):
    """`name`(scalars_before..., inputs..., scalars_after..., out)."""
    b = GraphBuilder()
    xs = [b.tensor(d, s) for d, s in ins]
    o = b.tensor(*out)
    pre = [b.scalar(v) for v in scalars_before]
    b.op(name, *pre, *xs, *[b.scalar(v) for v in scalars_after], o)
    return b.build(xs, [o])


@pytest.mark.parametrize("op,x_dtype,s,alpha", [
    ("add", np.float32, 1e-6, 1), ("add", np.int32, -3, 2), ("mul", np.float32, 0.125, None),
    ("remainder", np.int64, 16, None), ("remainder", np.int32, -5, None),
    ("remainder", np.float32, 2.5, None)])
def test_scalar_binary(gpu, rng, op, x_dtype, s, alpha):
    shape = (3, 67)
    after = [s, alpha] if op == "add" else [s]
    g, blob = _one(f"aten.{op}.Scalar", [(x_dtype, shape)], (x_dtype, shape), after)
    x = (rng.standard_normal(shape) * 40).astype(x_dtype)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    x64 = x.astype(np.float64)
    if op == "add":
        want = x64 + alpha * s
    elif op == "mul":
        want = x64 * s
    else:
        want = x64 - np.floor(x64 / s) * s   # Python's modulo: the divisor's sign
    exact = x_dtype != np.float32
    assert_close(ref.astype(np.float64), want, rel=1e-6, exact=exact, what="reference")
    assert_close(out, ref, exact=True, what=f"{op} GPU vs reference")


@pytest.mark.parametrize("dims,dim,n_idx", [((1, 3, 16, 5), 2, 4), ((7, 3), 0, 3), ((2, 9), 1, 1)])
def test_index_put_rows(gpu, rng, dims, dim, n_idx):
    b = GraphBuilder()
    x = b.tensor(np.float32, dims)
    vdims = dims[:dim] + (n_idx,) + dims[dim + 1:]
    v = b.tensor(np.float32, vdims)
    idx = b.tensor(np.int64, (n_idx,))
    nulls = [b.scalar(None) for _ in range(dim)]
    lst = b.value_list(nulls + [idx])
    o = b.tensor(np.float32, dims)
    b.op("aten.index_put.default", x, lst, v, b.scalar(False), o)
    g, blob = b.build([x, v, idx], [o])
    xs = rng.standard_normal(dims).astype(np.float32)
    vs = rng.standard_normal(vdims).astype(np.float32)
    rows = rng.choice(dims[dim], n_idx, replace=False)
    rows[0] -= dims[dim]   # a negative index counts from the end
    (out,), (ref,) = run_graph_both(g, blob, [xs, vs, rows.astype(np.int64)])
    want = xs.copy()
    want[(slice(None),) * dim + (rows,)] = vs
    assert_close(ref, want, exact=True, what="reference")
    assert_close(out, want, exact=True, what="index_put")


def test_copy_into_self_broadcasts_and_casts(gpu, rng):
    b = GraphBuilder()
    dst = b.tensor(np.float32, (2, 5, 3))
    src = b.tensor(np.int32, (5, 1))
    b.op("aten.copy_.default", dst, src, b.scalar(False), dst)
    g, blob = b.build([dst, src], [dst])
    s = rng.integers(-9, 9, (5, 1)).astype(np.int32)
    (out,), (ref,) = run_graph_both(g, blob, [np.zeros((2, 5, 3), np.float32), s])
    want = np.broadcast_to(s.astype(np.float32), (2, 5, 3))
    assert_close(ref, want, exact=True, what="reference")
    assert_close(out, want, exact=True, what="copy_")


@pytest.mark.parametrize("name,dims,arg", [("aten.any.dim", (3, 7, 5), [1]),
                                           ("aten.any.dims", (3, 7, 5), [[1, 2]]),
                                           ("aten.any.default", (4, 9), [])])
def test_any(gpu, rng, name, dims, arg):
    keep = {"aten.any.dim": (3, 1, 5), "aten.any.dims": (3, 1, 1), "aten.any.default": ()}
    g, blob = _one(name, [(np.float32, dims)], (np.bool_, keep[name]),
                   arg + ([True] if arg else []))
    x = (rng.random(dims) < 0.05).astype(np.float32) * rng.standard_normal(dims).astype(
        np.float32)
    x.flat[0] = np.nan
    (out,), (ref,) = run_graph_both(g, blob, [x])
    axes = {"aten.any.dim": (1,), "aten.any.dims": (1, 2), "aten.any.default": None}[name]
    want = (x != 0).any(axis=axes, keepdims=axes is not None)
    assert_close(ref, want, exact=True, what="reference")
    assert_close(out, want, exact=True, what=name)


@pytest.mark.parametrize("dtype,start,end,step", [(np.int64, 0, 37, 1), (np.float32, 5, -7, -3),
                                                  (np.int32, -2, 300, 7)])
def test_arange(gpu, dtype, start, end, step):
    want = np.arange(start, end, step)
    g, blob = _one("aten.arange.start_step", [], (dtype, want.shape),
                   [None, None, None, False], [start, end, step])
    (out,), (ref,) = run_graph_both(g, blob, [])
    assert_close(ref, want.astype(dtype), exact=True, what="reference")
    assert_close(out, want.astype(dtype), exact=True, what="arange")


def test_mm_and_scalar_tensor(gpu, rng):
    b = GraphBuilder()
    a, c = b.tensor(np.float32, (5, 19)), b.tensor(np.float32, (19, 3))
    o = b.tensor(np.float32, (5, 3))
    b.op("aten.mm.default", a, c, o)
    s = b.tensor(np.float32, ())
    b.op("aten.scalar_tensor.out", b.scalar(float("-inf")), s)
    g, blob = b.build([a, c], [o, s])
    xa, xc = rng.standard_normal((5, 19)).astype(np.float32), rng.standard_normal(
        (19, 3)).astype(np.float32)
    (out, inf), (ref, ref_inf) = run_graph_both(g, blob, [xa, xc])
    assert_close(ref, xa.astype(np.float64) @ xc, rel=1e-6, what="mm reference")
    assert_close(out, ref, rel=1e-6, what="mm")
    assert np.isneginf(inf) and np.isneginf(ref_inf)


def test_unsupported_forms_are_typed():
    g, _ = _one("aten.remainder.Scalar", [(np.int32, (4,))], (np.int32, (4,)), [0])
    with pytest.raises(UnsupportedOpError, match="remainder by zero"):
        lower(g)
    g, _ = _one("aten.arange.start_step", [], (np.float32, (3,)), [None, None, None, False],
                [0.5, 3, 1])
    with pytest.raises(UnsupportedOpError, match="non-integral"):
        lower(g)
    b = GraphBuilder()
    x, v = b.tensor(np.float32, (4, 3)), b.tensor(np.float32, (2, 3))
    i0, i1 = b.tensor(np.int64, (2,)), b.tensor(np.int64, (2,))
    o = b.tensor(np.float32, (4, 3))
    b.op("aten.index_put.default", x, b.value_list([i0, i1]), v, b.scalar(False), o)
    g, _ = b.build([x, v, i0, i1], [o])
    with pytest.raises(UnsupportedOpError, match="one index tensor"):
        lower(g)


@pytest.mark.parametrize("op", ["eq", "ne", "gt"])
def test_compare_with_an_infinite_scalar(gpu, op):
    """SDPA's decomposition tests rows for eq(x, -inf): the scalar is a runtime word."""
    g, blob = _one(f"aten.{op}.Scalar", [(np.float32, (6,))], (np.bool_, (6,)),
                   [float("-inf")])
    x = np.array([-np.inf, 0.0, -3e38, np.inf, -np.inf, 1.5], np.float32)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    want = {"eq": np.equal, "ne": np.not_equal, "gt": np.greater}[op](x, -np.inf)
    assert_close(ref, want, exact=True, what="reference")
    assert_close(out, want, exact=True, what=f"{op}(x, -inf)")
