"""amax/amin/argmax/argmin/sum/mean: any dims (inner, outer, several, all), keepdim, ties, NaN,
long rows, many rows, and the typed errors of unsupported forms."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.kernels.reduce.reduce import index_map
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

_NAMES = {"amax": "aten.amax.default", "amin": "aten.amin.default",
          "argmax": "aten.argmax.default", "argmin": "aten.argmin.default",
          "sum": "aten.sum.dim_IntList", "mean": "aten.mean.dim"}


def _out_shape(shape, dims, keepdim):
    if dims is None or dims == ():
        axes = set(range(len(shape)))
    else:
        axes = {d % len(shape) for d in ((dims,) if isinstance(dims, int) else dims)}
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _graph(op, shape, dims, keepdim, *, dtype=None, out_shape=None, x_dtype=np.float32):
    return _graph_of([op], shape, dims, keepdim, dtype=dtype, out_shape=out_shape,
                     x_dtype=x_dtype)


def _graph_of(ops, shape, dims, keepdim, *, dtype=None, out_shape=None, x_dtype=np.float32):
    """One graph applying each of `ops` to the same input (one plan, one run for all)."""
    g = GraphBuilder()
    x = g.tensor(x_dtype, shape)
    outs = []
    for op in ops:
        arg = op in ("argmax", "argmin")
        o = g.tensor(np.int64 if arg else np.float32,
                     _out_shape(shape, dims, keepdim) if out_shape is None else out_shape)
        extra = [] if op in ("amax", "amin", "argmax", "argmin") else [g.scalar(dtype)]
        g.op(_NAMES[op], x, g.scalar(dims), g.scalar(keepdim), *extra, o)
        outs.append(o)
    return g.build([x], outs)


def _expected(op, x, dims, keepdim):
    # Independent formula: numpy in float64 over the same axes.
    x64 = x.astype(np.float64)
    if op in ("argmax", "argmin"):
        f = np.argmax if op == "argmax" else np.argmin
        if dims is None:
            return np.asarray(f(x64)).astype(np.int32)
        return f(x64, axis=dims, keepdims=keepdim).astype(np.int32)
    axes = None if dims in (None, ()) else dims
    f = {"amax": np.max, "amin": np.min, "sum": np.sum, "mean": np.mean}[op]
    return f(x64, axis=axes, keepdims=keepdim).astype(np.float32)


def _check(ops, x, dims, keepdim, outs, refs):
    for op, out, ref in zip(ops, outs, refs, strict=True):
        exact = op not in ("sum", "mean")
        assert_close(ref, _expected(op, x, dims, keepdim), exact=exact, rel=1e-6,
                     what=f"{op} reference vs f64")
        assert_close(out, ref, exact=exact, rel=1e-5, what=op)


@pytest.mark.parametrize("shape,dim,keepdim", [
    ((37, 41), -1, True),          # innermost
    ((37, 29), 0, False),          # outermost: strided rows
    ((5, 7, 11), 1, True),         # middle
    ((2, 3, 1029), -1, False),     # row longer than workgroup x elements per invocation
    ((1, 9, 1, 3), 2, False),      # reducing a size-1 dim
    ((7,), 0, True),               # 1-D
])
def test_reduce_one_dim(gpu, rng, shape, dim, keepdim):
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    for ops, dims in ((["amax", "amin", "sum", "mean"], (dim,)), (["argmax", "argmin"], dim)):
        graph, blob = _graph_of(ops, shape, dims, keepdim)
        _check(ops, x, dims, keepdim, *run_graph_both(graph, blob, [x]))


@pytest.mark.parametrize("shape,dims,keepdim", [
    ((3, 5, 7, 2), (0, 2), True),      # two non-adjacent dims
    ((3, 5, 7, 2), (-1, 1), False),    # negative, unordered
    ((4, 6, 5), (1, 2), False),        # adjacent dims collapse into one
    ((3, 5, 7), (), False),            # empty list: every dim
    ((3, 5, 7), (0, 1, 2), True),      # every dim, listed
])
def test_reduce_several_dims(gpu, rng, shape, dims, keepdim):
    ops = ["amax", "amin", "sum", "mean"]
    graph, blob = _graph_of(ops, shape, dims, keepdim)
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    _check(ops, x, dims, keepdim, *run_graph_both(graph, blob, [x]))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_of_flattened_tensor(gpu, rng, op):
    shape = (4, 1, 37)
    graph, blob = _graph(op, shape, None, False)
    x = rng.standard_normal(shape).astype(np.float32)
    _check([op], x, None, False, *run_graph_both(graph, blob, [x]))


@pytest.mark.parametrize("n", [64, 257, 1000])
def test_ties_pick_the_first(gpu, n):
    # Each extreme sits at two places among equal values; a row of all-equal values: index 0.
    x = np.tile(np.float32(0.5), (3, n))
    x[:, n // 3] = x[:, n - 1] = 9.0
    x[:, n // 5] = x[:, n - 2] = -9.0
    x[2] = 1.25
    ops = ["amax", "amin", "argmax", "argmin"]
    graph, blob = _graph_of(ops[:2], x.shape, (-1,), False)
    _check(ops[:2], x, (-1,), False, *run_graph_both(graph, blob, [x]))
    graph, blob = _graph_of(ops[2:], x.shape, -1, False)
    _check(ops[2:], x, -1, False, *run_graph_both(graph, blob, [x]))


@pytest.mark.parametrize("arg", [False, True])
def test_nan_propagates(gpu, rng, arg):
    x = rng.standard_normal((4, 300)).astype(np.float32)
    x[0, 17] = x[0, 200] = np.nan      # first NaN wins
    x[1, 0] = np.nan                   # NaN at the start
    x[2, 299] = np.nan                 # NaN at the end
    ops = ["argmax", "argmin"] if arg else ["amax", "amin"]
    graph, blob = _graph_of(ops, x.shape, 1 if arg else (1,), True)
    outs, refs = run_graph_both(graph, blob, [x])
    for op, out, ref in zip(ops, outs, refs, strict=True):
        if arg:
            assert out.ravel()[:3].tolist() == [17, 0, 299], op
        else:
            assert np.isnan(out.ravel()[:3]).all() and not np.isnan(out.ravel()[3]), op
        assert_close(out, ref, exact=arg, what=f"{op} with NaN")


def test_amax_of_infinities(gpu):
    x = np.full((2, 50), -np.inf, np.float32)
    x[1, 7] = np.inf
    graph, blob = _graph("amax", x.shape, (1,), False)
    (out,), _ = run_graph_both(graph, blob, [x])
    assert out.tolist() == [-np.inf, np.inf]


def test_many_rows_fold_into_a_2d_grid(gpu, rng):
    shape = (3, 70000)  # 70000 outputs: more workgroups than one grid dimension holds
    graph, blob = _graph("amax", shape, (0,), False)
    x = rng.standard_normal(shape).astype(np.float32)
    _check(["amax"], x, (0,), False, *run_graph_both(graph, blob, [x]))


def test_index_map_collapses_neighbours():
    # (2, 3, 4, 5) reducing dims 1 and 2: kept (5, 1), (2, 60); reduced one dim of 12 * 5
    assert index_map((2, 3, 4, 5), (1, 2)) == ([(5, 1), (2, 60)], [(12, 5)])
    assert index_map((2, 1, 4), (0,)) == ([(4, 1)], [(2, 4)])
    assert index_map((3, 5), (0, 1)) == ([], [(15, 1)])


@pytest.mark.parametrize("op,dims,kw,match", [
    ("sum", (1,), {"dtype": 7}, "dtype"),
    ("mean", (1,), {"out_shape": (3, 5)}, "not the reduced shape"),
    ("argmax", None, {"keepdim": True}, "keepdim"),
    ("sum", (1,), {"x_dtype": np.int32}, "float32"),
    ("amax", (1, -1), {}, "twice"),
])
def test_unsupported_forms(op, dims, kw, match):
    keepdim = kw.pop("keepdim", False)
    graph, _ = _graph(op, (3, 4), dims, keepdim, **kw)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(graph)
