"""upsample_nearest2d / upsample_bilinear2d (source positions pinned to torch's), grid_sampler_2d
(every mode and padding against float64 loops) and et_vk.grid_priors."""

import math

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

NEAREST = "aten.upsample_nearest2d.vec"
BILINEAR = "aten.upsample_bilinear2d.vec"
GRID = "aten.grid_sampler_2d.default"
PRIORS = "et_vk.grid_priors.default"


def _upsample_graph(op, xshape, oshape, size=None, factors=None, align=False):
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    o = g.tensor(np.float32, oshape)
    extra = () if op == NEAREST else (g.scalar(align),)
    g.op(op, x, g.scalar(size), *extra, g.scalar(factors), o)
    return g.build([x], [o])


def _run_upsample(op, h, w, oh, ow, lead=(1, 1), **kw):
    """Outputs of an image whose value encodes its position: 100 * row + col."""
    graph, blob = _upsample_graph(op, (*lead, h, w), (*lead, oh, ow), **kw)
    plane = (100 * np.arange(h)[:, None] + np.arange(w)[None, :]).astype(np.float32)
    x = np.broadcast_to(plane, (*lead, h, w)) + np.arange(math.prod(lead)).reshape(
        *lead, 1, 1).astype(np.float32) * 10000
    (out,), (ref,) = run_graph_both(graph, blob, [np.ascontiguousarray(x, np.float32)])
    return out, ref


# (h, w, output_size or scale factors) -> the source rows and columns torch 2.x picks.
NEAREST_TORCH = [
    (5, 5, None, (1.6, 1.6), [0, 0, 1, 1, 2, 3, 3, 4], [0, 0, 1, 1, 2, 3, 3, 4]),
    (7, 3, (3, 7), None, [0, 2, 4], [0, 0, 0, 1, 1, 2, 2]),
    (10, 6, None, (0.6, 0.6), [0, 1, 3, 5, 6, 8], [0, 1, 3]),
    (3, 11, (7, 4), None, [0, 0, 0, 1, 1, 2, 2], [0, 2, 5, 8]),
    (6, 6, None, (1 / 3, 2.5), [0, 3], [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 5, 5]),
    (4, 5, None, (2.0, 1.0), [0, 0, 1, 1, 2, 2, 3, 3], [0, 1, 2, 3, 4]),
]


@pytest.mark.parametrize("h,w,size,factors,rows,cols", NEAREST_TORCH, ids=str)
def test_upsample_nearest_matches_torch(gpu, h, w, size, factors, rows, cols):
    out, ref = _run_upsample(NEAREST, h, w, len(rows), len(cols), size=size, factors=factors)
    want = (100 * np.array(rows)[:, None] + np.array(cols)[None, :]).astype(np.float32)
    assert_close(ref[0, 0], want, exact=True, what="reference vs torch's indices")
    assert_close(out, ref, exact=True, what="upsample_nearest2d")


# (h, w, align_corners, output_size or factors) -> torch's source positions (rows, cols).
BILINEAR_TORCH = [
    (5, 5, False, None, (1.6, 1.6), [0.0, 0.4375, 1.0625, 1.6875, 2.3125, 2.9375, 3.5625, 4.0],
     [0.0, 0.4375, 1.0625, 1.6875, 2.3125, 2.9375, 3.5625, 4.0]),
    (5, 5, True, None, (1.6, 1.6), [0.0, 0.571429, 1.142857, 1.714286, 2.285714, 2.857143,
                                    3.428572, 4.0], None),
    (4, 7, False, (7, 3), None, [0.0, 0.357143, 0.928571, 1.5, 2.071429, 2.642857, 3.0],
     [0.666667, 3.0, 5.333333]),
    (4, 7, True, (1, 3), None, [0.0], [0.0, 3.0, 6.0]),
]


@pytest.mark.parametrize("h,w,align,size,factors,rows,cols", BILINEAR_TORCH, ids=str)
def test_upsample_bilinear_matches_torch(gpu, h, w, align, size, factors, rows, cols):
    cols = rows if cols is None else cols
    out, ref = _run_upsample(BILINEAR, h, w, len(rows), len(cols), size=size, factors=factors,
                             align=align)
    # The image is linear in (row, col), so bilinear output is 100 * src_row + src_col.
    want = 100 * np.array(rows)[:, None] + np.array(cols)[None, :]
    assert_close(ref[0, 0], want.astype(np.float32), rel=1e-6, atol=2e-4,
                 what="reference vs torch's positions")
    assert_close(out, ref, rel=1e-6, atol=1e-4, what="upsample_bilinear2d")


@pytest.mark.parametrize("op,lead", [(NEAREST, (3, 5)), (BILINEAR, (2, 37)), (BILINEAR, (7,))],
                         ids=str)
def test_upsample_planes(gpu, op, lead):
    """Batch/channel planes (and a CHW input) are kept apart; 2x of a 13x9 image."""
    out, ref = _run_upsample(op, 13, 9, 26, 18, lead=lead, factors=(2.0, 2.0))
    assert_close(out, ref, rel=1e-6, atol=1e-3, what=op)
    planes = ref.reshape(-1, 26, 18)
    # Plane k holds 10000 k + 100 row + col; its top-left output is its top-left input.
    assert_close(planes[:, 0, 0], np.arange(len(planes), dtype=np.float32) * 10000, exact=True)
    if op == NEAREST:
        x = planes[:, ::2, ::2]
        assert_close(planes, x.repeat(2, 1).repeat(2, 2), exact=True, what="2x is repeat")


# -- grid_sampler_2d -------------------------------------------------------------------------

def _unnorm(g, size, align):
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(v, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    v = abs(v - lo)
    extra, flips = math.fmod(v, span), math.floor(v / span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _padc(v, size, padding, align):
    if padding == 0:
        return v
    if padding == 2:
        v = _reflect(v, 0, 2 * (size - 1)) if align else _reflect(v, -1, 2 * size - 1)
    return min(max(v, 0.0), size - 1.0)


def _cubic(t):
    a = -0.75

    def k(u):
        u = abs(u)
        return ((a + 2) * u - (a + 3)) * u * u + 1 if u <= 1 else \
            ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


def _grid_sample_loops(x, grid, mode, padding, align):
    """float64, one output point at a time; also the points whose nearest tap is a near-tie."""
    n, c, h, w = x.shape
    _, oh, ow, _ = grid.shape
    out = np.zeros((n, c, oh, ow))
    tie = np.zeros((n, oh, ow), bool)

    def at(b, iy, ix):
        return x[b, :, iy, ix] if 0 <= iy < h and 0 <= ix < w else np.zeros(c)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                fx = _unnorm(float(grid[b, i, j, 0]), w, align)
                fy = _unnorm(float(grid[b, i, j, 1]), h, align)
                if mode == 2:
                    x0, y0 = math.floor(fx), math.floor(fy)
                    wx, wy = _cubic(fx - x0), _cubic(fy - y0)
                    for r in range(4):
                        ty = int(_padc(y0 - 1 + r, h, padding, align))
                        for s in range(4):
                            tx = int(_padc(x0 - 1 + s, w, padding, align))
                            out[b, :, i, j] += wy[r] * wx[s] * at(b, ty, tx)
                    continue
                ix, iy = _padc(fx, w, padding, align), _padc(fy, h, padding, align)
                if mode == 1:
                    tie[b, i, j] = min(abs(ix % 1 - 0.5), abs(iy % 1 - 0.5)) < 1e-4
                    out[b, :, i, j] = at(b, round(iy), round(ix))
                    continue
                x0, y0 = math.floor(ix), math.floor(iy)
                ex, ey = ix - x0, iy - y0
                out[b, :, i, j] = ((1 - ex) * (1 - ey) * at(b, y0, x0) + ex * (1 - ey) *
                                   at(b, y0, x0 + 1) + (1 - ex) * ey * at(b, y0 + 1, x0) +
                                   ex * ey * at(b, y0 + 1, x0 + 1))
    return out, tie


def _grid_graph(xshape, gshape, mode, padding, align):
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    grid = g.tensor(np.float32, gshape)
    o = g.tensor(np.float32, (xshape[0], xshape[1], gshape[1], gshape[2]))
    g.op(GRID, x, grid, g.scalar(mode), g.scalar(padding), g.scalar(align), o)
    return g.build([x, grid], [o])


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [True, False], ids=["aligned", "unaligned"])
def test_grid_sampler(gpu, rng, mode, padding, align):
    xshape, gshape = (2, 3, 5, 7), (2, 4, 9, 2)
    graph, blob = _grid_graph(xshape, gshape, mode, padding, align)
    x = rng.standard_normal(xshape).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, gshape).astype(np.float32)   # beyond [-1, 1]: padding
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]
    (out,), (ref,) = run_graph_both(graph, blob, [x, grid])
    exact, tie = _grid_sample_loops(x, grid, mode, padding, align)
    keep = ~np.broadcast_to(tie[:, None], ref.shape)
    assert_close(ref[keep], exact[keep].astype(np.float32), rel=1e-5, atol=1e-5,
                 what="reference vs float64 loops")
    assert_close(out, ref, rel=1e-5, atol=1e-5, what="grid_sampler_2d")


def test_grid_sampler_single_pixel_image(gpu, rng):
    """size 1: reflection spans are empty and align_corners scales by 0."""
    for padding in (0, 1, 2):
        graph, blob = _grid_graph((1, 2, 1, 1), (1, 3, 5, 2), 0, padding, True)
        x = rng.standard_normal((1, 2, 1, 1)).astype(np.float32)
        grid = rng.uniform(-2, 2, (1, 3, 5, 2)).astype(np.float32)
        (out,), (ref,) = run_graph_both(graph, blob, [x, grid])
        assert_close(ref, _grid_sample_loops(x, grid, 0, padding, True)[0].astype(np.float32),
                     rel=1e-6, what="reference vs loops")
        assert_close(out, ref, rel=1e-6)


# -- grid_priors -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,stride,offset", [((1, 3, 8, 10), 8, 0.5), ((1, 3, 4, 4), 16, 0.0),
                                                ((2, 5, 7), 4, 0.1), ((300, 1), 3, 0.25)],
                         ids=str)
def test_grid_priors(gpu, rng, shape, stride, offset):
    g = GraphBuilder()
    x = g.tensor(np.float32, shape)
    h, w = shape[-2:]
    o = g.tensor(np.float32, (h * w, 2))
    g.op(PRIORS, x, g.scalar(stride), g.scalar(offset), o)
    graph, blob = g.build([x], [o])
    (out,), (ref,) = run_graph_both(graph, blob, [rng.standard_normal(shape).astype(np.float32)])
    i, j = np.divmod(np.arange(h * w), w)
    off = np.float32(offset)
    want = np.stack([(j + off) * stride, (i + off) * stride], -1).astype(np.float32)
    assert_close(ref, want, exact=True, what="reference vs formula")
    assert_close(out, ref, exact=True, what="grid_priors")


# -- typed errors ----------------------------------------------------------------------------

def test_bad_forms():
    with pytest.raises(UnsupportedOpError, match="does not match"):
        lower(_upsample_graph(NEAREST, (1, 1, 4, 4), (1, 1, 8, 7), factors=(2.0, 2.0))[0])
    with pytest.raises(UnsupportedOpError, match="output_size or scale_factors"):
        lower(_upsample_graph(BILINEAR, (1, 1, 4, 4), (1, 1, 8, 8))[0])
    with pytest.raises(UnsupportedOpError, match="interpolation mode 3"):
        lower(_grid_graph((1, 1, 4, 4), (1, 2, 2, 2), 3, 0, True)[0])
    with pytest.raises(UnsupportedOpError, match="are not"):
        lower(_grid_graph((1, 1, 4, 4), (1, 2, 2, 3), 0, 0, True)[0])
    g = GraphBuilder()
    x = g.tensor(np.float32, (1, 3, 4, 4))
    o = g.tensor(np.float32, (15, 2))
    g.op(PRIORS, x, g.scalar(8), g.scalar(0.5), o)
    with pytest.raises(UnsupportedOpError, match=r"\[H\*W, 2\]"):
        lower(g.build([x], [o])[0])
    g = GraphBuilder()
    x = g.tensor(np.float32, (1, 3, 4, 4))
    o = g.tensor(np.float32, (16, 2))
    g.op(PRIORS, x, g.scalar(8.5), g.scalar(0.5), o)      # a Double stride
    with pytest.raises(PlanError, match="an Int"):
        lower(g.build([x], [o])[0])
