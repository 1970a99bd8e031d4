"""aten.convolution.default and et_vk.conv_with_clamp.default: 1-D and 2-D, any stride,
padding, dilation and groups (depthwise included), and transposed convolution.

1-D convolutions run as 2-D ones with H = 1. Patch embeddings (stride == kernel, no padding,
dilation 1, groups 1, no clamp) run on the tiled matmul kernel with a patch-gather B
(matmul.py): out[n] = W[O, C*kh*kw] @ patches[n][C*kh*kw, Ho*Wo]; pointwise convolutions are
that form with a 1x1 kernel. Every other form runs the direct kernel (shaders/conv/conv.wgsl.j2):
one output element per invocation, an f32 sum over the group's input channels and the kernel
window in (channel, ky, kx) order, skipping taps outside the input, then the bias, then the
clamp. Its numpy reference adds the taps in the same order in float32; the matmul path's
reference accumulates in float64 and rounds to float32.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from .._np import np
from ..matmul.matmul import emit_matmul
from ..registry import OpUnit

WORKGROUP = 64


@dataclass(frozen=True)
class ConvGeometry:
    """A convolution as 2-D NCHW (1-D: h = kh = oh = 1); weight [co, ci/groups, kh, kw], or
    [ci, co/groups, kh, kw] when transposed."""

    n: int
    ci: int
    h: int
    w: int
    co: int
    kh: int
    kw: int
    oh: int
    ow: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    transposed: bool

    @property
    def ci_per_group(self) -> int:
        return self.ci // self.groups

    @property
    def co_per_group(self) -> int:
        return self.co // self.groups

    @property
    def is_patch(self) -> bool:
        return (not self.transposed and self.groups == 1 and self.dilation == (1, 1)
                and self.padding == (0, 0) and self.stride == (self.kh, self.kw))


@dataclass(frozen=True)
class ConvCall:
    x: int
    weight: int
    bias: int | None
    out: int
    geo: ConvGeometry
    clamp: tuple[float | None, float | None]   # f32 bounds, None where unbounded


def _spatial(v: tuple[int, ...], rank: int, what: str) -> tuple[int, ...] | str:
    """A stride/padding/... list as `rank` numbers (a single number applies to every dim)."""
    if len(v) == 1:
        return v * rank
    if len(v) == rank:
        return tuple(v)
    return f"{what} {list(v)} does not fit a {rank}-D convolution"


def _f32_bound(v: float | None, sign: int) -> float | None:
    """A clamp bound rounded to f32; an infinite one on its no-op side is no bound."""
    if v is None or math.isnan(v):
        return None
    try:
        f = struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        f = math.copysign(math.inf, v)
    return None if math.isinf(f) and (f > 0) == (sign > 0) else f


def _geometry(A, x, w, out, stride_id, padding_id, dilation_id, transposed_id, out_pad_id,
              groups_id) -> ConvGeometry | str:
    dx, dw, do = (tuple(A.tensor(v).dims) for v in (x, w, out))
    if len(dx) not in (3, 4) or len(dw) != len(dx) or len(do) != len(dx):
        return (f"only 1-D and 2-D convolutions are supported: x {list(dx)}, weight "
                f"{list(dw)}, out {list(do)}")
    rank = len(dx) - 2
    lists = [_spatial(A.ints(v), rank, what) for v, what in (
        (stride_id, "stride"), (padding_id, "padding"), (dilation_id, "dilation"),
        (out_pad_id, "output_padding"))]
    bad = next((s for s in lists if isinstance(s, str)), None)
    if bad:
        return bad
    if rank == 1:   # as 2-D with a height of 1
        dx, dw, do = ((*d[:2], 1, d[2]) for d in (dx, dw, do))
        lists = [(first, *v) for first, v in zip((1, 0, 1, 0), lists)]
    (sh, sw), (ph, pw), (dh, dw_), (oph, opw) = lists
    groups, transposed = A.int(groups_id), A.bool(transposed_id)
    n, ci, h, wd = dx
    kh, kw = dw[2:]
    if groups < 1 or ci % groups:
        return f"groups={groups} does not divide the {ci} input channels"
    if min(sh, sw, dh, dw_) < 1 or min(ph, pw, oph, opw) < 0:
        return f"stride {[sh, sw]}, dilation {[dh, dw_]} must be >= 1, padding >= 0"
    if transposed:
        co = dw[1] * groups
        if dw[0] != ci:
            return f"transposed weight has {dw[0]} input channels, x has {ci}"
        if oph >= max(sh, dh) or opw >= max(sw, dw_):
            return f"output_padding {[oph, opw]} must be smaller than stride or dilation"
        oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
        ow = (wd - 1) * sw - 2 * pw + dw_ * (kw - 1) + opw + 1
    else:
        co = dw[0]
        if dw[1] * groups != ci or co % groups:
            return f"weight {list(dw)} does not fit {ci} input channels in {groups} groups"
        if oph or opw:
            return f"output_padding {[oph, opw]} is only meaningful for transposed convolution"
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + 2 * pw - dw_ * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        return f"input {list(dx[2:])} is smaller than the dilated kernel"
    if do != (n, co, oh, ow):
        return f"output {list(do)} does not match x {list(dx)} and weight {list(dw)}"
    return ConvGeometry(n, ci, h, wd, co, kh, kw, oh, ow, (sh, sw), (ph, pw), (dh, dw_), groups,
                        transposed)


def _parse(A, call) -> ConvCall:
    x, w, b, *conv_args = call.args[:9]
    out = call.args[-1]
    clamp: tuple = (None, None)
    if call.name == "et_vk.conv_with_clamp.default":
        lo, hi = (A.optional_float(v) for v in call.args[9:11])
        clamp = (_f32_bound(lo, -1), _f32_bound(hi, 1))
        if clamp[0] is not None and clamp[1] is not None and clamp[0] > clamp[1]:
            raise A.unsupported(call, f"clamp bounds {clamp} are empty")
    geo = _geometry(A, x, w, out, *conv_args)
    if isinstance(geo, str):
        raise A.unsupported(call, geo)
    bias = None if A.is_null(b) else b
    if bias is not None and tuple(A.tensor(bias).dims) != (geo.co,):
        raise A.unsupported(call, f"bias must be [{geo.co}], got {list(A.tensor(bias).dims)}")
    return ConvCall(x, w, bias, out, geo, clamp)


def lower(L, call) -> None:
    c = _parse(L.args, call)
    g = c.geo
    if g.is_patch and c.clamp == (None, None):
        K = g.ci * g.kh * g.kw
        # Four consecutive k (= kernel columns) are contiguous in x when kw and W allow vec4.
        b_fill = "k4" if g.kw % 4 == 0 and g.w % 4 == 0 else "scalar"
        emit_matmul(L, "convolution", c.weight, c.x, c.out, batch=g.n, M=g.co, N=g.oh * g.ow,
                    K=K, a_strides=(0, K, 1), b_strides=(g.ci * g.h * g.w, 0, 0),
                    bias=c.bias, bias_axis="m", b_fill=b_fill, b_layout="patch",
                    kh=g.kh, kw=g.kw, in_h=g.h, in_w=g.w, out_w=g.ow)
        return
    total = g.n * g.co * g.oh * g.ow
    wg, row = L.grid(total, WORKGROUP)
    k = L.kernel("conv/conv", geo=g, total=total, has_bias=c.bias is not None,
                 lo=c.clamp[0], hi=c.clamp[1], workgroup=WORKGROUP, row=row)
    binds = [L.buf(c.x), L.buf(c.weight)] + ([L.buf(c.bias)] if c.bias is not None else [])
    L.dispatch(k, binds + [L.buf(c.out)], wg)


# -- numpy reference -----------------------------------------------------------------------

def _taps(o: np.ndarray, k: int, stride: int, pad: int, dil: int, size: int, transposed: bool):
    """(input index, valid) of kernel tap k for output positions o along one axis."""
    if transposed:
        t = o + pad - k * dil
        valid = (t >= 0) & (t % stride == 0) & (t // stride < size)
        i = t // stride
    else:
        i = o * stride + k * dil - pad
        valid = (i >= 0) & (i < size)
    return np.clip(i, 0, size - 1), valid


def _direct(x: np.ndarray, w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """The direct kernel's sum: float32, taps in (channel, ky, kx) order, outside taps skipped."""
    n = np.arange(g.n)[:, None, None, None]
    o = np.arange(g.co)[None, :, None, None]
    oy = np.arange(g.oh)[None, None, :, None]
    ox = np.arange(g.ow)[None, None, None, :]
    acc = np.zeros((g.n, g.co, g.oh, g.ow), np.float32)
    for c in range(g.ci_per_group):
        ci = (o // g.co_per_group) * g.ci_per_group + c
        for ky in range(g.kh):
            iy, vy = _taps(oy, ky, g.stride[0], g.padding[0], g.dilation[0], g.h, g.transposed)
            for kx in range(g.kw):
                ix, vx = _taps(ox, kx, g.stride[1], g.padding[1], g.dilation[1], g.w,
                               g.transposed)
                wv = (w[ci, o % g.co_per_group, ky, kx] if g.transposed else w[o, c, ky, kx])
                acc = np.where(vy & vx, acc + x[n, ci, iy, ix] * wv, acc)
    return acc


def reference(R, call) -> None:
    c = _parse(R.args, call)
    g = c.geo
    shape4 = (g.n, g.ci, g.h, g.w)
    x = R.get(c.x).reshape(shape4)
    w = R.get(c.weight).reshape((-1, R.get(c.weight).shape[1], g.kh, g.kw))
    if g.is_patch and c.clamp == (None, None):
        patches = x.astype(np.float64)[:, :, :g.oh * g.kh, :g.ow * g.kw].reshape(
            g.n, g.ci, g.oh, g.kh, g.ow, g.kw)
        y = np.einsum("nchiwj,ocij->nohw", patches, w.astype(np.float64))
        if c.bias is not None:
            y = y + R.get(c.bias).astype(np.float64)[None, :, None, None]
        R.set(c.out, y.astype(np.float32).reshape(R.args.tensor(c.out).dims))
        return
    y = _direct(x, w, g)
    if c.bias is not None:
        y = y + R.get(c.bias)[None, :, None, None]
    lo, hi = c.clamp
    if lo is not None:
        y = np.maximum(y, np.float32(lo))
    if hi is not None:
        y = np.minimum(y, np.float32(hi))
    R.set(c.out, y.reshape(R.args.tensor(c.out).dims))


def shape(values, call) -> dict[int, tuple[int, ...]]:
    """The output's dims for the call's (possibly other) input dims: dynamic shapes."""
    x, w = (values[v].dims for v in call.args[:2])
    stride, pad, dil, transposed, out_pad, groups = (values[v] for v in call.args[3:9])
    rank = len(x) - 2

    def per_dim(v) -> tuple[int, ...]:
        v = v if isinstance(v, tuple) else (v,)
        return v * rank if len(v) == 1 else v

    stride, pad, dil, out_pad = map(per_dim, (stride, pad, dil, out_pad))
    if transposed:
        co = w[1] * groups
        sp = [(x[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w[2 + i] - 1) + out_pad[i] + 1
              for i in range(rank)]
    else:
        co = w[0]
        sp = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
              for i in range(rank)]
    return {call.args[-1]: (x[0], co, *sp)}


UNITS = [OpUnit(("aten.convolution.default", "et_vk.conv_with_clamp.default"), lower, reference,
                {"aten.convolution.default": "Tf Tf Tf? I I I b I i Tf",
                 "et_vk.conv_with_clamp.default": "Tf Tf Tf? I I I b I i f? f? Tf"},
                shape=shape)]
