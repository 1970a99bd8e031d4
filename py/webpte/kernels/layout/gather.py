"""The gather copy shared by the layout ops: an output element's source is an affine
function of its coordinates, described as data (`GatherMap`) and rendered by one template
(shaders/layout/gather.wgsl.j2).

The output is viewed row-major as `axes` (their sizes multiply to its element count); each
axis adds `o * stride` (signed: flips step backwards) to the source index, or
`clamp(index[o]) * stride` for the one axis an index tensor drives (index_select,
embedding), or `clamp(index[i]) * stride` with `i` the output element's flat index when the
index tensor is shaped as the output (aten.gather). An axis with bounds reads the source
only for `lo <= o < hi` and holds the pad value elsewhere (constant_pad_nd). Repeats and
pixel shuffles are such maps over a finer view of the output (an output dim split into
several axes), expands are stride-0 axes.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from .._np import np
from ..elementwise.unary import to_storage_array
from ..storage import PACKED, WGSL_TYPE, storage_of


@dataclass(frozen=True)
class Axis:
    """One output axis: `size` coordinates, each `stride` input elements apart.

    `hi` not None: only coordinates in [lo, hi) read the input (the rest are pad).
    `bound` > 0: the axis is driven by the index tensor, whose values are clamped into
    [0, bound) (torch raises on out-of-range indices; a kernel cannot, so it clamps).
    `per_element`: that index tensor is read at the output element's flat index, not at
    this axis's coordinate.
    """

    size: int
    stride: int
    lo: int = 0
    hi: int | None = None
    bound: int = 0
    per_element: bool = False

    @property
    def plain(self) -> bool:
        return self.hi is None and not self.bound


@dataclass(frozen=True)
class GatherMap:
    """Output axes (outermost first) and the input index of output element 0 (before
    bounds: a padded map may start before the input)."""

    axes: tuple[Axis, ...]
    offset: int = 0

    @property
    def padded(self) -> bool:
        return any(a.hi is not None for a in self.axes)

    @property
    def indexed(self) -> bool:
        return any(a.bound for a in self.axes)


def strided_map(dims, strides, offset: int = 0) -> GatherMap:
    """A map of plain axes: output dims `dims` reading input strides `strides`."""
    return GatherMap(tuple(Axis(d, s) for d, s in zip(dims, strides)), offset)


def collapse(gmap: GatherMap) -> GatherMap:
    """Drop plain size-1 axes and merge plain neighbours that step evenly through the input,
    so the kernel divides as little as possible."""
    merged: list[Axis] = []
    for a in gmap.axes:
        if a.plain and a.size == 1:
            continue
        last = merged[-1] if merged else None
        if last is not None and last.plain and a.plain and last.stride == a.stride * a.size:
            merged[-1] = Axis(last.size * a.size, a.stride)
        else:
            merged.append(a)
    return GatherMap(tuple(merged) or (Axis(1, 0),), gmap.offset)


def pad_axis(size: int, stride: int, before: int, in_size: int) -> tuple[Axis, int]:
    """An output axis of `size` whose input starts at coordinate `before` (negative: the
    input is cropped); returns the axis and its contribution to the map's offset."""
    lo, hi = max(0, before), min(size, before + in_size)
    if lo == 0 and hi == size:
        return Axis(size, stride), -before * stride
    return Axis(size, stride, lo, max(lo, hi)), -before * stride


def compute_type(in_kind: str) -> str:
    """Copies compute in f32 from float storage and in i32 from every other kind."""
    return "f32" if in_kind == "f32" else "i32"


def _pad_word(value: float, ty: str) -> float | int:
    """The pad value as the kernel's compute type holds it (f32 rounding / truncation)."""
    if ty == "f32":
        try:
            return struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:       # beyond f32: torch pads with the infinity of its sign
            return math.copysign(math.inf, value)
    return int(math.trunc(value)) if math.isfinite(value) else 0


def emit_gather(L, x: int, out: int, gmap: GatherMap, what: str, *, pad: float = 0.0,
                index: int | None = None) -> None:
    """Dispatch one gather writing all of `out` from `x` through `gmap` (collapsed here);
    `index`: the int tensor the map's indexed axis reads."""
    to = L.tensor(out)
    n = to.numel
    if n == 0:
        return
    in_kind, out_kind = L.storage(x), L.storage(out)
    gmap = collapse(gmap)
    ty = compute_type(in_kind)
    packed = out_kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    if in_kind != out_kind:
        what = f"{what} cast {in_kind}->{out_kind}"
    axes = [{"size": a.size, "stride": a.stride, "lo": a.lo, "hi": a.hi, "bound": a.bound,
             "per_element": a.per_element} for a in gmap.axes]
    k = L.kernel("layout/gather", what=what, n=n, axes=axes, offset=gmap.offset,
                 padded=gmap.padded, indexed=gmap.indexed, ty=ty, in_kind=in_kind,
                 out_kind=out_kind, in_wgsl=WGSL_TYPE[in_kind], out_wgsl=WGSL_TYPE[out_kind],
                 out_packed=packed, workgroup=256, row=row)
    bindings = [L.buf(x)]
    if gmap.indexed:
        bindings.append(L.buf(index))
    if gmap.padded:
        # The pad value is a runtime word, so -inf/NaN pads need no WGSL literal and
        # pads of different values share one pipeline.
        bindings.append(L.params(_pad_word(pad, ty)))
    L.dispatch(k, [*bindings, L.buf(out)], wg)


def computed(x) -> np.ndarray:
    """An input array as the kernels compute with it: f32 from float storage, else i32."""
    return x.astype(np.float32 if x.dtype == np.float32 else np.int32)


def pad_value(x, value: float) -> np.ndarray:
    """The pad value as the kernel holds it, in the compute dtype of `x`."""
    return np.asarray(_pad_word(value, "f32" if x.dtype == np.float32 else "i32"),
                      computed(x).dtype)


def store(R, out: int, v) -> None:
    """Set `out` from computed values, converted to its storage kind as the kernels do."""
    to = R.args.tensor(out)
    R.set(out, to_storage_array(np.asarray(v), storage_of(to)).reshape(to.dims))


__all__ = ["Axis", "GatherMap", "collapse", "compute_type", "computed", "emit_gather",
           "pad_axis", "pad_value", "store", "strided_map"]
