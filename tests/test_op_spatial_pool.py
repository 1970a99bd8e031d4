"""max_pool2d_with_indices and avg_pool2d: padding, dilation, ceil_mode, count_include_pad,
divisor_override, CHW and NCHW inputs; values against window loops, indices exact."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.kernels.conv.pool import out_size
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

MAX = "aten.max_pool2d_with_indices.default"
AVG = "aten.avg_pool2d.default"


def _max_graph(xshape, k, s, p, d, ceil, out_shape=None):
    oh, ow = (out_size(xshape[-2 + i], k[i], s[i], p[i], d[i], ceil) for i in range(2))
    out_shape = out_shape or (*xshape[:-2], oh, ow)
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    vals, idx = g.tensor(np.float32, out_shape), g.tensor(np.int64, out_shape)
    g.op(MAX, x, *[g.scalar(tuple(v)) for v in (k, s, p, d)], g.scalar(ceil),
         g.value_list([vals, idx]))
    return g.build([x], [vals, idx])


def _avg_graph(xshape, k, s, p, ceil, cip, divisor, out_shape=None):
    oh, ow = (out_size(xshape[-2 + i], k[i], s[i], p[i], 1, ceil) for i in range(2))
    out_shape = out_shape or (*xshape[:-2], oh, ow)
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    o = g.tensor(np.float32, out_shape)
    g.op(AVG, x, *[g.scalar(tuple(v)) for v in (k, s, p)], g.scalar(ceil), g.scalar(cip),
         g.scalar(divisor), o)
    return g.build([x], [o])


def _windows(x, k, s, p, d, out_hw):
    """Yield (plane index, oy, ox, [(iy, ix) in-bounds taps], padded-window extent)."""
    h, w = x.shape[-2:]
    for oy in range(out_hw[0]):
        for ox in range(out_hw[1]):
            sy, sx = oy * s[0] - p[0], ox * s[1] - p[1]
            taps = [(sy + ky * d[0], sx + kx * d[1]) for ky in range(k[0]) for kx in range(k[1])
                    if 0 <= sy + ky * d[0] < h and 0 <= sx + kx * d[1] < w]
            extent = (min(sy + k[0], h + p[0]) - sy) * (min(sx + k[1], w + p[1]) - sx)
            yield oy, ox, taps, extent


MAX_CASES = [
    ((1, 4, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((1, 3, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((2, 3, 9, 11), (3, 2), (2, 3), (1, 1), (2, 1), False),   # every axis differs, dilation
    ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),     # ceil: 3x3 instead of 2x2
    ((3, 13, 10), (3, 3), (2, 2), (1, 0), (1, 1), True),      # CHW input
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1), False),
    ((1, 70, 14, 14), (2, 2), (2, 2), (0, 0), (1, 1), False),  # > one 64-wide workgroup
]


@pytest.mark.parametrize("xshape,k,s,p,d,ceil", MAX_CASES, ids=str)
def test_max_pool(gpu, rng, xshape, k, s, p, d, ceil):
    graph, blob = _max_graph(xshape, k, s, p, d, ceil)
    x = rng.standard_normal(xshape).astype(np.float32)
    x.flat[::7] = x.flat[1::7][: x.flat[::7].size]   # ties: the first maximum wins
    (out, oidx), (ref, ridx) = run_graph_both(graph, blob, [x])
    planes = x.reshape(-1, *x.shape[-2:])
    want_v, want_i = np.zeros(ref.shape).reshape(planes.shape[0], -1), []
    for pi, plane in enumerate(planes):
        for j, (_, _, taps, _) in enumerate(_windows(plane, k, s, p, d, ref.shape[-2:])):
            vals = [plane[t] for t in taps]
            best = int(np.argmax(vals))
            want_v[pi, j] = vals[best]
            want_i.append(taps[best][0] * x.shape[-1] + taps[best][1])
    assert_close(ref, want_v.reshape(ref.shape).astype(np.float32), exact=True,
                 what="reference vs loops")
    assert_close(ridx, np.array(want_i).reshape(ref.shape).astype(np.int32), exact=True,
                 what="reference indices vs loops")
    assert_close(out, ref, exact=True, what="max_pool2d values")
    assert_close(oidx, ridx.astype(oidx.dtype), exact=True, what="max_pool2d indices")


AVG_CASES = [
    ((1, 2, 4, 4), (2, 2), (2, 2), (0, 0), False, True, None),
    ((1, 2, 5, 5), (3, 3), (2, 2), (1, 1), False, True, None),
    ((1, 2, 5, 5), (3, 3), (2, 2), (1, 1), False, False, None),
    ((2, 3, 5, 7), (3, 2), (2, 3), (1, 1), False, True, None),
    ((1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, 3),
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), True, True, None),   # overhanging ceil window
    ((1, 2, 5, 5), (3, 3), (2, 2), (0, 0), True, False, None),
    ((3, 8, 9), (3, 3), (3, 2), (1, 1), True, True, None),      # CHW, ceil + padding
    ((1, 67, 3, 3), (3, 3), (1, 1), (1, 1), False, False, 5),
]


@pytest.mark.parametrize("xshape,k,s,p,ceil,cip,divisor", AVG_CASES, ids=str)
def test_avg_pool(gpu, rng, xshape, k, s, p, ceil, cip, divisor):
    graph, blob = _avg_graph(xshape, k, s, p, ceil, cip, divisor)
    x = rng.standard_normal(xshape).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    planes = x.reshape(-1, *x.shape[-2:]).astype(np.float64)
    want = np.zeros((planes.shape[0], ref.shape[-2] * ref.shape[-1]))
    for pi, plane in enumerate(planes):
        for j, (_, _, taps, extent) in enumerate(_windows(plane, k, s, p, (1, 1),
                                                          ref.shape[-2:])):
            div = divisor or (extent if cip else len(taps))
            want[pi, j] = sum(plane[t] for t in taps) / div if taps else 0.0
    assert_close(ref, want.reshape(ref.shape).astype(np.float32), rel=1e-6, atol=1e-6,
                 rtol=1e-5, what="reference vs loops")
    assert_close(out, ref, rel=1e-6, atol=1e-6, rtol=1e-5, what="avg_pool2d")


def test_max_pool_nan_wins(gpu):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    graph, blob = _max_graph(x.shape, (2, 2), (2, 2), (0, 0), (1, 1), False)
    (out, idx), (ref, ridx) = run_graph_both(graph, blob, [x])
    assert np.isnan(ref[0, 0, 0, 0]) and ridx[0, 0, 0, 0] == 1
    assert np.isnan(out[0, 0, 0, 0]) and idx[0, 0, 0, 0] == 1
    assert_close(out[..., 1:], ref[..., 1:], exact=True)


@pytest.mark.parametrize("build,match", [
    (lambda: _max_graph((1, 1, 5, 5), (2, 2), (2, 2), (2, 0), (1, 1), False), "half the kernel"),
    (lambda: _max_graph((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), False, (1, 1, 3, 3)),
     "should be"),
    (lambda: _avg_graph((1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False, True, 0), "divisor"),
    (lambda: _avg_graph((4, 4), (2, 2), (2, 2), (0, 0), False, True, None, (2, 2)), "NCHW"),
])
def test_pool_bad_forms(build, match):
    graph, _ = build()
    with pytest.raises(UnsupportedOpError, match=match):
        lower(graph)
