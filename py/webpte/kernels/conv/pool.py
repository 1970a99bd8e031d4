"""aten.max_pool2d_with_indices.default and aten.avg_pool2d.default (NCHW or CHW, float32).

Sizes follow torch's pooling rule: floor((in + 2p - d(k-1) - 1 [+ s-1 with ceil_mode]) / s) + 1,
one less when ceil_mode's last window would start past the input and its right padding.
Max pooling takes the first maximum of the window in row-major order (a NaN wins, like torch)
and writes its index into the input plane (iy * W + ix) to the second output. Average pooling
sums the window's in-bounds taps in f32 row-major order and divides by divisor_override, or the
window's size clipped to the padded input (count_include_pad), or its in-bounds tap count;
a window wholly in the padding is 0. The references do the same f32 arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._np import np
from ..registry import OpUnit

MAX = "aten.max_pool2d_with_indices.default"
AVG = "aten.avg_pool2d.default"
WORKGROUP = 64


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a pooling window."""

    size: int
    out: int
    kernel: int
    stride: int
    pad: int
    dilation: int = 1

    def starts(self):
        return [o * self.stride - self.pad for o in range(self.out)]


@dataclass(frozen=True)
class Pool:
    x: int
    out: int
    indices: int | None
    planes: int            # N * C
    y: Axis
    x_axis: Axis
    count_include_pad: bool = True
    divisor: int | None = None


def out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling output size."""
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _pair(v: tuple[int, ...], what: str, A, call) -> tuple[int, int]:
    if len(v) == 1:
        return v[0], v[0]
    if len(v) == 2:
        return v[0], v[1]
    raise A.unsupported(call, f"{what} {list(v)} is not 2-D")


def _parse(A, call) -> Pool:
    if call.name == MAX:
        x, k_id, s_id, p_id, d_id, ceil_id, outs = call.args
        ids = A.value_list(outs)
        if len(ids) != 2:
            raise A.unsupported(call, f"expects (values, indices) outputs, got {len(ids)}")
        out, indices = ids
        dil = _pair(A.ints(d_id), "dilation", A, call)
        cip, divisor = True, None
    else:
        x, k_id, s_id, p_id, ceil_id, cip_id, div_id, out = call.args
        indices, dil = None, (1, 1)
        cip = A.bool(cip_id)
        divisor = None if A.is_null(div_id) else A.int(div_id)
        if divisor == 0:
            raise A.unsupported(call, "divisor_override must not be 0")
    kernel = _pair(A.ints(k_id), "kernel_size", A, call)
    # An empty stride means stride = kernel_size.
    stride = _pair(A.ints(s_id), "stride", A, call) if A.ints(s_id) else kernel
    pad = _pair(A.ints(p_id), "padding", A, call)
    ceil_mode = A.bool(ceil_id)
    dx, do = tuple(A.tensor(x).dims), tuple(A.tensor(out).dims)
    if len(dx) not in (3, 4):
        raise A.unsupported(call, f"input {list(dx)} is not CHW or NCHW")
    if min(*kernel, *stride, *dil) < 1 or min(pad) < 0:
        raise A.unsupported(call, f"kernel {kernel}, stride {stride}, dilation {dil} must be "
                                  f">= 1, padding {pad} >= 0")
    if pad[0] > kernel[0] // 2 or pad[1] > kernel[1] // 2:
        raise A.unsupported(call, f"padding {list(pad)} exceeds half the kernel {list(kernel)}")
    axes = [Axis(dx[-2 + i], out_size(dx[-2 + i], kernel[i], stride[i], pad[i], dil[i],
                                      ceil_mode), kernel[i], stride[i], pad[i], dil[i])
            for i in range(2)]
    want = (*dx[:-2], axes[0].out, axes[1].out)
    if do != want or min(want) < 1:
        raise A.unsupported(call, f"output {list(do)} should be {list(want)} for input "
                                  f"{list(dx)}")
    if indices is not None and tuple(A.tensor(indices).dims) != do:
        raise A.unsupported(call, f"indices {list(A.tensor(indices).dims)} differ from the "
                                  f"values {list(do)}")
    for ax in axes:   # a max window with no in-bounds tap has no maximum
        if call.name == MAX and not all(
                any(0 <= s + k * ax.dilation < ax.size for k in range(ax.kernel))
                for s in ax.starts()):
            raise A.unsupported(call, "a pooling window lies wholly in the padding")
    planes = dx[0] * dx[1] if len(dx) == 4 else dx[0]
    return Pool(x, out, indices, planes, axes[0], axes[1], cip, divisor)


def lower(L, call) -> None:
    p = _parse(L.args, call)
    if p.indices is not None and L.storage(p.indices) != "i32":
        raise L.unsupported(f"indices must be int32/int64, got {L.tensor(p.indices).dtype.name}")
    total = p.planes * p.y.out * p.x_axis.out
    wg, row = L.grid(total, WORKGROUP)
    k = L.kernel("conv/pool", mode="max" if p.indices is not None else "avg", y=p.y,
                 x_axis=p.x_axis, total=total, count_include_pad=p.count_include_pad,
                 divisor=p.divisor, workgroup=WORKGROUP, row=row)
    outs = [p.out] + ([p.indices] if p.indices is not None else [])
    L.dispatch(k, [L.buf(p.x)] + [L.buf(v) for v in outs], wg)


# -- numpy reference -----------------------------------------------------------------------

def _windows(ax: Axis):
    """(input index per tap (out, kernel), valid per tap) along one axis."""
    idx = np.array(ax.starts())[:, None] + np.arange(ax.kernel)[None, :] * ax.dilation
    return np.clip(idx, 0, ax.size - 1), (idx >= 0) & (idx < ax.size)


def _max(x: np.ndarray, p: Pool):
    iy, vy = _windows(p.y)
    ix, vx = _windows(p.x_axis)
    best = np.full((x.shape[0], p.y.out, p.x_axis.out), -np.inf, np.float32)
    where = np.full(best.shape, -1, np.int64)
    for ky in range(p.y.kernel):
        for kx in range(p.x_axis.kernel):
            ok = (vy[:, ky][:, None] & vx[:, kx][None, :])[None]
            v = x[:, iy[:, ky][:, None], ix[:, kx][None, :]]
            take = ok & ((where < 0) | (v > best) | np.isnan(v))
            best = np.where(take, v, best)
            flat = iy[:, ky][:, None] * p.x_axis.size + ix[:, kx][None, :]
            where = np.where(take, flat[None], where)
    return best, where


def _avg(x: np.ndarray, p: Pool) -> np.ndarray:
    iy, vy = _windows(p.y)
    ix, vx = _windows(p.x_axis)
    acc = np.zeros((x.shape[0], p.y.out, p.x_axis.out), np.float32)
    for ky in range(p.y.kernel):
        for kx in range(p.x_axis.kernel):
            ok = (vy[:, ky][:, None] & vx[:, kx][None, :])[None]
            acc = np.where(ok, acc + x[:, iy[:, ky][:, None], ix[:, kx][None, :]], acc)
    count = vy.sum(1)[:, None] * vx.sum(1)[None, :]
    if p.divisor is not None:
        div = np.full(count.shape, p.divisor)
    elif p.count_include_pad:
        div = _padded_extent(p.y)[:, None] * _padded_extent(p.x_axis)[None, :]
    else:
        div = count
    out = acc / np.maximum(div, 1).astype(np.float32)[None]
    return np.where(count[None] > 0, out, np.float32(0))


def _padded_extent(ax: Axis) -> np.ndarray:
    """The window's length clipped to the padded input (count_include_pad's divisor)."""
    s = np.array(ax.starts())
    return np.minimum(s + ax.kernel, ax.size + ax.pad) - s


def reference(R, call) -> None:
    p = _parse(R.args, call)
    x = R.get(p.x).reshape(p.planes, p.y.size, p.x_axis.size)
    shape = R.args.tensor(p.out).dims
    if p.indices is None:
        R.set(p.out, _avg(x, p).reshape(shape))
        return
    best, where = _max(x, p)
    R.set(p.out, best.reshape(shape))
    R.set(p.indices, where.reshape(shape))


UNITS = [OpUnit((MAX, AVG), lower, reference,
                {MAX: "Tf I I I I b L", AVG: "Tf I I I b b i? Tf"})]
