"""The int8 window-sum kernel behind q8ta_conv2d* and q8ta_linear*.

A linear is a 1x1 convolution over x [M, K, 1, 1], so one Geometry describes both:
output (batch, oc, oh, ow); reduction index k over (kh, kw, ic_in_group) in the weight
row order of the Vulkan partitioner; x read through strides, its zero point where the
window leaves the input (regular: ih = oh*stride - pad + kh*dil; transposed: ih with
ih*stride = oh + pad - kh*dil). Weight rows are read as
    rows:  row oc of [*, w_row] bytes, w_row % 4 == 0: four k per u32 word
    bytes: the same with w_row % 4 != 0: four bytes gathered, packed
    taps:  depthwise [KH, KW, w_row]: tap k of channel oc is byte k * w_row + oc
Per output element (one packed word of four per invocation):
    acc = sum_k x * W                   i32, exact (dot4I8Packed, or an i32 dot)
    adj = acc - in_zp * weight_sums[oc] i32 (wrapping)
    y   = f32(adj) * (f32(in_scale) * scales[oc]) + bias[oc];  relu;  quantize to int8
The numpy reference does the same in int64 (narrowed to i32) and f32. f32(adj) is exact
while |adj| < 2^24 (K * 255 * 128 < 2^24 for K < 514).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import PlanError
from .._np import np
from .linear_q8 import use_dot4
from .q8ta_common import check_zero_point, requant_params, requant_ref
from .quantize import f32

__all__ = ["Geometry", "check_geometry", "lower_gemm", "gemm_reference"]

WORKGROUP = 64


@dataclass(frozen=True)
class Geometry:
    x: int
    w: int
    sums: int
    scales: int
    bias: int | None
    out: int
    in_scale: float
    in_zp: int
    out_scale: float
    out_zp: int
    relu: bool
    batch: int
    oc: int
    oh: int
    ow: int
    ic: int
    ih: int
    iw: int
    x_strides: tuple[int, int, int, int]  # (batch, channel, row, column), in elements
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    transposed: bool
    w_mode: str  # rows | bytes | taps
    w_row: int  # bytes per weight row (rows/bytes), channels per tap (taps)

    @property
    def icg(self) -> int:
        return self.ic // self.groups

    @property
    def kdim(self) -> int:
        return self.kernel[0] * self.kernel[1] * self.icg

    @property
    def numel(self) -> int:
        return self.batch * self.oc * self.oh * self.ow


def check_geometry(A, call, g: Geometry) -> None:
    """Per-channel operands and quantization parameters (UnsupportedOpError / PlanError)."""
    check_zero_point(A, call, g.in_zp)
    check_zero_point(A, call, g.out_zp)
    if not 0 < g.in_scale < float("inf"):
        raise PlanError(f"{A.op_name}: input scale must be positive, got {g.in_scale}")
    per_channel = [(g.sums, ("INT32", "INT64")), (g.scales, ("FLOAT32",))]
    if g.bias is not None:
        per_channel.append((g.bias, ("FLOAT32",)))
    for vid, dtypes in per_channel:
        t = A.tensor(vid)
        if t.dtype.name not in dtypes or t.numel < g.oc:
            raise A.unsupported(call, f"per-channel value {vid} must be {dtypes[0].lower()} "
                                      f"with >= {g.oc} entries, is {t.dtype.name.lower()} "
                                      f"{list(t.dims)}")
    if g.kdim == 0:
        raise A.unsupported(call, "an empty reduction (K = 0)")
    requant_params(g.out_scale, g.out_zp)  # checks the output scale


def lower_gemm(L, g: Geometry) -> None:
    if g.numel == 0:
        return
    q = requant_params(g.out_scale, g.out_zp)
    groups, row = L.grid(-(-g.numel // 4), WORKGROUP)
    kern = L.kernel(
        "quantized/q8ta_gemm", n=g.numel, workgroup=WORKGROUP, row=row,
        dot4=use_dot4(L.features, hinted=False), has_bias=g.bias is not None, relu=g.relu,
        oc=g.oc, oh=g.oh, ow=g.ow, ih=g.ih, iw=g.iw, xs=g.x_strides,
        kernel_h=g.kernel[0], kernel_w=g.kernel[1], stride=g.stride, padding=g.padding,
        dilation=g.dilation, icg=g.icg, ocg=g.oc // g.groups, kdim=g.kdim,
        words=-(-g.kdim // 4), transposed=g.transposed, w_mode=g.w_mode, w_row=g.w_row)
    # Scales and zero points are params words: convolutions of one shape share a pipeline.
    params = L.params(f32(g.in_scale), g.in_zp, 0, *q)
    vids = [g.x, g.w, g.sums, g.scales] + ([g.bias] if g.bias is not None else [])
    L.dispatch(kern, [L.buf(v) for v in vids] + [params, L.buf(g.out)], groups)


def _window_index(o: np.ndarray, k: np.ndarray, size: int, stride: int, pad: int, dil: int,
                  transposed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Input index (clipped) and validity for output positions `o` x kernel taps `k`."""
    o, k = o[:, None], k[None, :]
    if transposed:
        t = o + pad - k * dil
        i, valid = t // stride, t % stride == 0
    else:
        i = o * stride - pad + k * dil
        valid = np.ones(i.shape, bool)
    valid = valid & (i >= 0) & (i < size)
    return np.clip(i, 0, size - 1), valid


def weight_matrix(w: np.ndarray, g: Geometry) -> np.ndarray:
    """W as int64 [OC, K] in the reduction order (kh, kw, ic_in_group)."""
    if g.w_mode == "taps":
        return w.reshape(g.kdim, g.w_row)[:, : g.oc].T.astype(np.int64)
    return w.reshape(-1, g.w_row)[: g.oc, : g.kdim].astype(np.int64)


def gemm_reference(R, g: Geometry) -> None:
    x = R.get(g.x).reshape(-1)
    sn, sc, sh, sw = g.x_strides
    (kh, kw), (dh, dw) = g.kernel, g.dilation
    ih, vh = _window_index(np.arange(g.oh), np.arange(kh), g.ih, g.stride[0], g.padding[0],
                           dh, g.transposed)  # (OH, KH)
    iw, vw = _window_index(np.arange(g.ow), np.arange(kw), g.iw, g.stride[1], g.padding[1],
                           dw, g.transposed)  # (OW, KW)
    idx = (np.arange(g.batch)[:, None, None, None, None, None] * sn
           + np.arange(g.ic)[None, None, None, None, None, :] * sc
           + ih[None, :, None, :, None, None] * sh + iw[None, None, :, None, :, None] * sw)
    valid = vh[None, :, None, :, None, None] & vw[None, None, :, None, :, None]
    cols = np.where(valid, x[idx].astype(np.int64), np.int64(g.in_zp))  # (N,OH,OW,KH,KW,IC)
    cols = cols.reshape(g.batch, g.oh, g.ow, kh * kw, g.groups, g.icg).transpose(0, 1, 2, 4, 3, 5)
    cols = cols.reshape(g.batch, g.oh, g.ow, g.groups, g.kdim)
    wm = weight_matrix(R.get(g.w), g).reshape(g.groups, g.oc // g.groups, g.kdim)
    acc = np.einsum("nhwgk,gok->ngohw", cols, wm).reshape(g.batch, g.oc, g.oh, g.ow)
    sums = R.get(g.sums).reshape(-1)[: g.oc].astype(np.int64)
    adj = acc - np.int64(g.in_zp) * sums[None, :, None, None]
    adj = ((adj + 2**31) % 2**32 - 2**31).astype(np.int32)  # i32 wrap, as on the GPU
    scale = np.float32(f32(g.in_scale)) * R.get(g.scales).reshape(-1)[: g.oc]
    y = adj.astype(np.float32) * scale[None, :, None, None]
    if g.bias is not None:
        y = y + R.get(g.bias).reshape(-1)[: g.oc][None, :, None, None]
    if g.relu:
        y = np.maximum(y, np.float32(0))
    q = requant_ref(y, requant_params(g.out_scale, g.out_zp))
    R.set(g.out, q.reshape(R.args.tensor(g.out).dims))
