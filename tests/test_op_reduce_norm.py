"""aten.native_group_norm.default (out, mean, rstd) and inference batch norm
(aten._native_batch_norm_legit_no_training.default): affine or not, odd sizes, bad forms."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

_GN = "aten.native_group_norm.default"
_BN = "aten._native_batch_norm_legit_no_training.default"


def _affine(g, rng, c, affine):
    if not affine:
        return g.scalar(None), g.scalar(None), None, None
    w = (1 + 0.5 * rng.standard_normal(c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    return g.constant(w), g.constant(b), w, b


def _group_norm_graph(rng, shape, groups, *, affine=True, eps=1e-5, stats=True):
    g = GraphBuilder()
    n, c = shape[:2]
    hw = int(np.prod(shape[2:]))
    x = g.tensor(np.float32, shape)
    w, b, w_arr, b_arr = _affine(g, rng, c, affine)
    out = g.tensor(np.float32, shape)
    mean, rstd = g.tensor(np.float32, (n, groups)), g.tensor(np.float32, (n, groups))
    g.op(_GN, x, w, b, g.scalar(n), g.scalar(c), g.scalar(hw), g.scalar(groups), g.scalar(eps),
         g.value_list([out, mean, rstd]))
    graph, blob = g.build([x], [out, mean, rstd] if stats else [out])
    return graph, blob, w_arr, b_arr


def _group_norm64(x, groups, w, b, eps):
    # Independent formula: numpy's mean/var in float64 over each (sample, group).
    n, c = x.shape[:2]
    v = x.astype(np.float64).reshape(n, groups, -1)
    mu, var = v.mean(axis=2), v.var(axis=2)
    rstd = 1 / np.sqrt(var + eps)
    y = ((v - mu[..., None]) * rstd[..., None]).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    y = y * w.reshape(per_channel) if w is not None else y
    y = y + b.reshape(per_channel) if b is not None else y
    return y, mu, rstd


@pytest.mark.parametrize("shape,groups,affine", [
    ((2, 4, 3, 5), 2, True),
    ((1, 6, 2, 2), 3, True),
    ((1, 4, 3, 3), 1, False),       # one group, no affine
    ((3, 10, 37), 5, True),         # 3-D input, odd HxW
    ((2, 32, 16, 16), 8, True),     # rows of 1024: longer than workgroup x 16
    ((2, 6, 1, 1), 6, True),        # groups of one element: variance 0
])
def test_group_norm(gpu, rng, shape, groups, affine):
    eps = 1e-5
    graph, blob, w, b = _group_norm_graph(rng, shape, groups, affine=affine, eps=eps)
    x = (2 * rng.standard_normal(shape) + 0.5).astype(np.float32)
    outs, refs = run_graph_both(graph, blob, [x])
    for want, ref in zip(_group_norm64(x, groups, w, b, eps), refs, strict=True):
        assert_close(ref, want.astype(np.float32), rel=1e-6, what="reference vs f64")
    for name, out, ref in zip(("out", "mean", "rstd"), outs, refs, strict=True):
        assert_close(out, ref, rel=1e-5, what=f"group norm {name}")


def test_group_norm_large_offset_two_pass(gpu, rng):
    shape, groups = (1, 8, 40, 40), 2
    graph, blob, _, _ = _group_norm_graph(rng, shape, groups)
    x = (1000 + rng.standard_normal(shape)).astype(np.float32)  # one-pass E[x^2]-E[x]^2 fails
    outs, refs = run_graph_both(graph, blob, [x])
    for name, out, ref in zip(("out", "mean", "rstd"), outs, refs, strict=True):
        assert_close(out, ref, rel=1e-5, what=f"group norm {name}")


def test_group_norm_channels_not_divisible_is_unsupported(rng):
    graph, _, _, _ = _group_norm_graph(rng, (1, 6, 2, 2), 4)
    with pytest.raises(UnsupportedOpError, match="multiple of group"):
        lower(graph)


def _batch_norm_graph(rng, shape, *, affine=True, eps=1e-5, save_shape=(0,)):
    g = GraphBuilder()
    c = shape[1]
    x = g.tensor(np.float32, shape)
    w, b, w_arr, b_arr = _affine(g, rng, c, affine)
    mean = rng.standard_normal(c).astype(np.float32)
    var = (0.2 + rng.random(c)).astype(np.float32)
    out = g.tensor(np.float32, shape)
    saved = [g.tensor(np.float32, save_shape), g.tensor(np.float32, save_shape)]
    g.op(_BN, x, w, b, g.constant(mean), g.constant(var), g.scalar(0.1), g.scalar(eps),
         g.value_list([out, *saved]))
    graph, blob = g.build([x], [out])
    return graph, blob, (w_arr, b_arr, mean, var)


@pytest.mark.parametrize("shape,affine", [
    ((1, 16, 5, 7), True),
    ((2, 8, 12, 12), False),
    ((3, 5, 11), True),       # 1-D batch norm over [N, C, L]
    ((7, 3), True),           # [N, C]
])
def test_batch_norm(gpu, rng, shape, affine):
    eps = 1e-5
    graph, blob, (w, b, mean, var) = _batch_norm_graph(rng, shape, affine=affine, eps=eps)
    x = (2 * rng.standard_normal(shape) + 0.5).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    per_channel = (1, shape[1]) + (1,) * (len(shape) - 2)
    want = (x.astype(np.float64) - mean.reshape(per_channel)) / np.sqrt(
        var.astype(np.float64).reshape(per_channel) + eps)
    if affine:
        want = want * w.reshape(per_channel) + b.reshape(per_channel)
    assert_close(ref, want.astype(np.float32), rel=1e-6, what="reference vs f64")
    assert_close(out, ref, rel=1e-6, what="batch norm")


def test_batch_norm_filled_saved_stats_are_unsupported(rng):
    graph, _, _ = _batch_norm_graph(rng, (1, 4, 3, 3), save_shape=(4,))
    with pytest.raises(UnsupportedOpError, match="save_mean"):
        lower(graph)
