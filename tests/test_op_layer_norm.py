"""aten.native_layer_norm.default: out, mean and rstd; weight/bias optional; bad forms."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _graph(rng, shape, norm, *, weight=True, bias=True, eps=1e-6):
    g = GraphBuilder()
    x = g.tensor(np.float32, shape)
    w_arr = (1 + 0.5 * rng.standard_normal(norm)).astype(np.float32) if weight else None
    b_arr = rng.standard_normal(norm).astype(np.float32) if bias else None
    w = g.constant(w_arr) if weight else g.scalar(None)
    b = g.constant(b_arr) if bias else g.scalar(None)
    stat_shape = tuple(shape[:len(shape) - len(norm)]) + (1,) * len(norm)
    out = g.tensor(np.float32, shape)
    mean, rstd = g.tensor(np.float32, stat_shape), g.tensor(np.float32, stat_shape)
    g.op("aten.native_layer_norm.default", x, g.scalar(tuple(norm)), w, b, g.scalar(eps),
         g.value_list([out, mean, rstd]))
    graph, blob = g.build([x], [out, mean, rstd])
    return graph, blob, w_arr, b_arr


def _layer_norm64(x, norm, w, b, eps):
    # Independent formula: numpy's mean/var in float64 over the trailing dims.
    axes = tuple(range(x.ndim - len(norm), x.ndim))
    x = x.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    y = (x - mu) * rstd
    y = y * w if w is not None else y
    y = y + b if b is not None else y
    return y, mu, rstd


@pytest.mark.parametrize("shape,norm,weight,bias", [
    ((3, 5, 37), (37,), True, True),        # odd D
    ((2, 300, 768), (768,), True, True),    # vision-tower width, row longer than a workgroup
    ((4, 7, 9), (7, 9), True, False),       # two normalized dims, no bias
    ((11, 37), (37,), False, False),        # no affine
    ((1, 1), (1,), True, True),             # one-element rows (variance 0)
])
def test_layer_norm(gpu, rng, shape, norm, weight, bias):
    eps = 1e-5
    graph, blob, w, b = _graph(rng, shape, norm, weight=weight, bias=bias, eps=eps)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    outs, refs = run_graph_both(graph, blob, [x])
    for want, ref in zip(_layer_norm64(x, norm, w, b, eps), refs, strict=True):
        assert_close(ref, want.astype(np.float32), rel=1e-6, what="reference vs f64")
    for name, out, ref in zip(("out", "mean", "rstd"), outs, refs, strict=True):
        assert_close(out, ref, rel=1e-5, what=f"layer norm {name}")


def test_layer_norm_large_offset_two_pass(gpu, rng):
    shape, norm = (6, 768), (768,)
    graph, blob, w, b = _graph(rng, shape, norm)
    x = (1000 + rng.standard_normal(shape)).astype(np.float32)  # one-pass E[x^2]-E[x]^2 fails
    outs, refs = run_graph_both(graph, blob, [x])
    for name, out, ref in zip(("out", "mean", "rstd"), outs, refs, strict=True):
        assert_close(out, ref, rel=1e-5, what=f"layer norm {name}")


def test_layer_norm_not_trailing_is_unsupported(rng):
    graph, _, _, _ = _graph(rng, (4, 6), (6,))
    graph.values[graph.chain[0].args[1]] = (4,)
    with pytest.raises(UnsupportedOpError, match="not the trailing dims"):
        lower(graph)
