"""aten.grid_sampler_2d.default: bilinear, nearest and bicubic sampling of an NCHW float32 image
at grid points (grid [N, Ho, Wo, 2], x then y in [-1, 1]), with zeros, border or reflection
padding, as torch defines them (GridSampler.h), in f32:

    unnormalize: align_corners ? (g + 1) / 2 * (size - 1) : ((g + 1) * size - 1) / 2
    border: clamp to [0, size - 1]; reflection: fold into [0, size - 1] (align_corners) or
    [-0.5, size - 0.5], then clamp. Taps outside the image read 0.
    bilinear: the four neighbours of floor(ix), floor(iy) weighted by the opposite areas;
    nearest: the tap at round-half-even(ix), round-half-even(iy);
    bicubic: Keys' cubic (A = -0.75) over the 4x4 taps around floor(ix), floor(iy), each tap's
    coordinate padded on its own, rows first and then the column of row results.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._np import np
from ..registry import OpUnit

OP = "aten.grid_sampler_2d.default"
MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
CUBIC_A = -0.75
WORKGROUP = 64


@dataclass(frozen=True)
class GridSample:
    x: int
    grid: int
    out: int
    n: int
    c: int
    h: int
    w: int
    oh: int
    ow: int
    mode: str
    padding: str
    align_corners: bool


def _parse(A, call) -> GridSample:
    x, grid, mode_id, pad_id, align_id, out = call.args
    mode, padding = MODES.get(A.int(mode_id)), PADDINGS.get(A.int(pad_id))
    if mode is None or padding is None:
        raise A.unsupported(call, f"interpolation mode {A.int(mode_id)} / padding mode "
                                  f"{A.int(pad_id)} is not one of {MODES} / {PADDINGS}")
    dx, dg, do = (tuple(A.tensor(v).dims) for v in (x, grid, out))
    if (len(dx) != 4 or len(dg) != 4 or dg[3] != 2 or dg[0] != dx[0]
            or do != (dx[0], dx[1], dg[1], dg[2]) or min(dx) < 1):
        raise A.unsupported(call, f"input {list(dx)}, grid {list(dg)} and output {list(do)} "
                                  f"are not [N, C, H, W], [N, Ho, Wo, 2] and [N, C, Ho, Wo]")
    return GridSample(x, grid, out, *dx, dg[1], dg[2], mode, padding, A.bool(align_id))


def lower(L, call) -> None:
    s = _parse(L.args, call)
    total = s.n * s.c * s.oh * s.ow
    wg, row = L.grid(total, WORKGROUP)
    k = L.kernel("conv/grid_sample", s=s, total=total, cubic_a=CUBIC_A, workgroup=WORKGROUP,
                 row=row)
    L.dispatch(k, [L.buf(s.x), L.buf(s.grid), L.buf(s.out)], wg)


# -- numpy reference (float32, the kernel's formulas) --------------------------------------

def _F(v):
    """A float32 scalar (numpy is read at call time: planning in the page has none)."""
    return np.float32(v)


def _unnormalize(g: np.ndarray, size: int, align: bool) -> np.ndarray:
    if align:
        return (g + _F(1)) / _F(2) * _F(size - 1)
    return ((g + _F(1)) * _F(size) - _F(1)) / _F(2)


def _reflect(v: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    if twice_low == twice_high:
        return np.zeros_like(v)
    lo, span = _F(twice_low / 2), _F((twice_high - twice_low) / 2)
    v = np.abs(v - lo)
    flips = np.floor(v / span)
    extra = v - span * np.trunc(v / span)    # WGSL's float % (x - y * trunc(x / y))
    return np.where(np.fmod(flips, 2) == 0, extra + lo, span - extra + lo)


def _pad(v: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    if padding == "zeros":
        return v
    if padding == "reflection":
        v = _reflect(v, 0, 2 * (size - 1)) if align else _reflect(v, -1, 2 * size - 1)
    return np.clip(v, _F(0), _F(size - 1))


def _tap(img: np.ndarray, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """img[:, :, iy, ix] (iy, ix: [N, Ho, Wo] ints) -> [N, C, Ho, Wo], 0 outside the image."""
    h, w = img.shape[2:]
    ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    n = np.arange(img.shape[0])[:, None, None]
    v = img[n, :, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]      # [N, Ho, Wo, C]
    return np.where(ok[..., None], v, _F(0)).transpose(0, 3, 1, 2)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a, one, two = _F(CUBIC_A), _F(1), _F(2)

    def near(u):   # |u| <= 1
        return ((a + two) * u - (a + _F(3))) * u * u + one

    def far(u):    # 1 < |u| < 2
        return ((a * u - _F(5) * a) * u + _F(8) * a) * u - _F(4) * a
    return [far(t + one), near(t), near(one - t), far(two - t)]


def sample(img: np.ndarray, grid: np.ndarray, s: GridSample) -> np.ndarray:
    ix = _unnormalize(grid[..., 0], s.w, s.align_corners)
    iy = _unnormalize(grid[..., 1], s.h, s.align_corners)
    if s.mode == "bicubic":
        x0, y0 = np.floor(ix), np.floor(iy)
        wx, wy = _cubic_weights(ix - x0), _cubic_weights(iy - y0)
        rows = []
        for i in range(4):
            ty = _pad(y0 + _F(i - 1), s.h, s.padding, s.align_corners).astype(np.int64)
            acc = np.zeros((s.n, s.c, s.oh, s.ow), np.float32)
            for j in range(4):
                tx = _pad(x0 + _F(j - 1), s.w, s.padding, s.align_corners).astype(np.int64)
                acc = acc + _tap(img, ty, tx) * wx[j][:, None]
            rows.append(acc)
        out = np.zeros_like(rows[0])
        for i in range(4):
            out = out + rows[i] * wy[i][:, None]
        return out
    ix = _pad(ix, s.w, s.padding, s.align_corners)
    iy = _pad(iy, s.h, s.padding, s.align_corners)
    if s.mode == "nearest":
        return _tap(img, np.round(iy).astype(np.int64), np.round(ix).astype(np.int64))
    x0, y0 = np.floor(ix), np.floor(iy)
    ex, ey = ix - x0, iy - y0          # weights of the east / south neighbours
    wx0, wy0 = x0 + _F(1) - ix, y0 + _F(1) - iy
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    out = np.zeros((s.n, s.c, s.oh, s.ow), np.float32)
    for ty, tx, wgt in ((y0, x0, wx0 * wy0), (y0, x0 + 1, ex * wy0),
                        (y0 + 1, x0, wx0 * ey), (y0 + 1, x0 + 1, ex * ey)):
        out = out + wgt[:, None] * _tap(img, ty, tx)
    return out


def reference(R, call) -> None:
    s = _parse(R.args, call)
    R.set(s.out, sample(R.get(s.x), R.get(s.grid), s))


UNITS = [OpUnit((OP,), lower, reference, {OP: "Tf Tf i i b Tf"})]
