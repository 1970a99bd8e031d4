"""aten.upsample_nearest2d.vec and aten.upsample_bilinear2d.vec (float32, NCHW or CHW).

Source positions follow torch's CPU kernels in f32. Nearest: the same row when the size is
unchanged, row >> 1 when it doubles, else min(floor(dst * scale), in - 1), where scale is
f32(1 / scale_factor) when a scale factor is given, else f32(in) / out. Bilinear: scale is
(in - 1) / (out - 1) with align_corners (src = scale * dst), else as for nearest with
src = max(scale * (dst + 0.5) - 0.5, 0); then i0 = min(floor(src), in - 1), i1 = i0 + 1 but
for the last row, l1 = clamp(src - i0, 0, 1) and
out = l0h * (l0w * x00 + l1w * x01) + l1h * (l0w * x10 + l1w * x11).
The scales are computed here once and given to the kernel and the reference alike.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .._np import np
from ..registry import OpUnit

NEAREST = "aten.upsample_nearest2d.vec"
BILINEAR = "aten.upsample_bilinear2d.vec"
WORKGROUP = 64


def f32(v: float) -> float:
    """v rounded to float32, without numpy."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


@dataclass(frozen=True)
class Axis:
    """One resized axis: sizes, how a source position is found ("same", "half", "scale",
    "aligned" or "half_pixel") and the f32 scale."""

    size: int
    out: int
    rule: str
    scale: float


@dataclass(frozen=True)
class Resize:
    x: int
    out: int
    planes: int
    y: Axis
    x_axis: Axis
    mode: str   # "nearest" or "bilinear"


def _unaligned_scale(size: int, out: int, factor: float | None) -> float:
    return f32(1.0 / factor) if factor is not None and factor > 0 else f32(f32(size) / out)


def _axis(mode: str, size: int, out: int, factor: float | None, align: bool) -> Axis:
    if mode == "nearest":
        if out == size:
            return Axis(size, out, "same", 1.0)
        if out == 2 * size:
            return Axis(size, out, "half", 0.5)
        return Axis(size, out, "scale", _unaligned_scale(size, out, factor))
    if align:
        return Axis(size, out, "aligned", f32(f32(size - 1) / (out - 1)) if out > 1 else 0.0)
    return Axis(size, out, "half_pixel", _unaligned_scale(size, out, factor))


def _parse(A, call) -> Resize:
    if call.name == NEAREST:
        x, size_id, factors_id, out = call.args
        mode, align = "nearest", False
    else:
        x, size_id, align_id, factors_id, out = call.args
        mode, align = "bilinear", A.bool(align_id)
    dx, do = tuple(A.tensor(x).dims), tuple(A.tensor(out).dims)
    if len(dx) not in (3, 4) or len(do) != len(dx) or do[:-2] != dx[:-2]:
        raise A.unsupported(call, f"input {list(dx)} / output {list(do)} are not NCHW or CHW "
                                  f"with the same leading dims")
    factors: tuple = (None, None)
    if not A.is_null(factors_id):
        fv = A.graph.values[factors_id]
        if len(fv) != 2:
            raise A.unsupported(call, f"scale_factors {list(fv)} are not 2-D")
        factors = tuple(float(v) for v in fv)
        if not all(0 < f and s * f < 1 << 31 for s, f in zip(dx[-2:], factors)):
            raise A.unsupported(call, f"scale_factors {list(factors)} are not finite and positive "
                                      f"(or give sizes past 2^31)")
        want = tuple(int(s * f) for s, f in zip(dx[-2:], factors))
    elif not A.is_null(size_id):
        want = A.ints(size_id)
    else:
        raise A.unsupported(call, "needs output_size or scale_factors")
    if tuple(want) != do[-2:] or min(do) < 1 or min(dx) < 1:
        raise A.unsupported(call, f"output {list(do)} does not match the size {list(want)}")
    y, xa = (_axis(mode, dx[-2 + i], do[-2 + i], factors[i], align) for i in range(2))
    planes = dx[0] * dx[1] if len(dx) == 4 else dx[0]
    return Resize(x, out, planes, y, xa, mode)


def lower(L, call) -> None:
    r = _parse(L.args, call)
    total = r.planes * r.y.out * r.x_axis.out
    wg, row = L.grid(total, WORKGROUP)
    k = L.kernel("conv/upsample", mode=r.mode, y=r.y, x_axis=r.x_axis, total=total,
                 workgroup=WORKGROUP, row=row)
    L.dispatch(k, [L.buf(r.x), L.buf(r.out)], wg)


# -- numpy reference -----------------------------------------------------------------------

def source(ax: Axis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i0, i1, lambda1) per output position, in the kernel's f32 arithmetic."""
    dst = np.arange(ax.out)
    s = np.float32(ax.scale)
    if ax.rule == "same":
        return dst, dst, np.zeros(ax.out, np.float32)
    if ax.rule == "half":
        return dst >> 1, dst >> 1, np.zeros(ax.out, np.float32)
    d = dst.astype(np.float32)
    if ax.rule == "scale":
        i0 = np.minimum(np.floor(d * s).astype(np.int64), ax.size - 1)
        return i0, i0, np.zeros(ax.out, np.float32)
    if ax.rule == "aligned":
        src = s * d
    else:
        src = np.maximum(s * (d + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), ax.size - 1)
    lam = np.clip(src - i0.astype(np.float32), np.float32(0), np.float32(1))
    return i0, np.where(i0 < ax.size - 1, i0 + 1, i0), lam


def reference(R, call) -> None:
    r = _parse(R.args, call)
    x = R.get(r.x).reshape(r.planes, r.y.size, r.x_axis.size)
    y0, y1, ly = source(r.y)
    x0, x1, lx = source(r.x_axis)
    if r.mode == "nearest":
        out = x[:, y0[:, None], x0[None, :]]
    else:
        one = np.float32(1)
        ly, lx = ly[:, None], lx[None, :]
        top = (one - lx) * x[:, y0[:, None], x0[None, :]] + lx * x[:, y0[:, None], x1[None, :]]
        bot = (one - lx) * x[:, y1[:, None], x0[None, :]] + lx * x[:, y1[:, None], x1[None, :]]
        out = (one - ly) * top + ly * bot
    R.set(r.out, out.reshape(R.args.tensor(r.out).dims))


UNITS = [OpUnit((NEAREST, BILINEAR), lower, reference,
                {NEAREST: "Tf I? F? Tf", BILINEAR: "Tf I? b F? Tf"})]
