"""et_vk.q8ta_conv2d / _pw / _dw / _transposed: int8 convolutions with int8 outputs.

Args: x int8 [N, IC, H, W], input scale, zero point, W int8 (below), weight_sums int32
[OC4], weight_scales f32 [OC4], output scale, zero point, bias f32 [OC4] or Null,
kernel_size, stride, padding, (transposed: output_padding), dilation, groups,
activation ("none" / "relu"), out int8 [N, OC, OH, OW] (OC4 = OC padded to 4).

Weight layouts, as ExecuTorch's Vulkan partitioner writes them (patterns/
quantized_convolution.py; custom_ops_lib.py's reference views them differently, but the
golden comes from the float model and matches the partitioner):
    conv2d, conv2d_pw:   [OC, Kp], row oc = (kh, kw, ic_in_group) flattened
    conv2d_transposed:   [OC, Kp], the same order (from torch's (IC, OC/g, KH, KW))
    conv2d_dw:           [KH, KW, C]
with K = KH * KW * IC/groups and Kp = K rounded up to 4 (zero padding).

Arithmetic (q8ta_gemm.py): the int32 window sum of x * W, where x outside the input
reads as the input zero point (zero in the dequantized domain torch pads with), minus
zp * weight_sums[oc]; then y = f32(adj) * (f32(in_scale) * scales[oc]) + bias[oc],
relu, and torch's quantize to int8.
"""

from __future__ import annotations

from ...errors import PlanError
from ..registry import OpUnit
from .q8ta_common import gemm_operands
from .q8ta_gemm import Geometry, check_geometry, gemm_reference, lower_gemm

CONV = "et_vk.q8ta_conv2d.default"
CONV_PW = "et_vk.q8ta_conv2d_pw.default"
CONV_DW = "et_vk.q8ta_conv2d_dw.default"
CONV_T = "et_vk.q8ta_conv2d_transposed.default"
_SIG = "Tq f i Tq Ti Tf f i Tf? I I I I i s Tq"
_SIG_T = "Tq f i Tq Ti Tf f i Tf? I I I I I i s Tq"


def _pair(A, vid: int, what: str) -> tuple[int, int]:
    v = A.ints(vid)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise PlanError(f"{A.op_name}: {what} {list(v)} should have 1 or 2 entries")
    return v[0], v[1]


def geometry(A, call) -> Geometry:
    """The call as a Geometry (checked: shapes, dtypes, parameters)."""
    transposed = call.name == CONV_T
    head, rest, (act, out) = call.args[:9], call.args[9:-2], call.args[-2:]
    if transposed:
        ks, st, pad, opad, dil, groups = rest
        out_pad = _pair(A, opad, "output_padding")
    else:
        ks, st, pad, dil, groups = rest
        out_pad = (0, 0)
    q = gemm_operands(A, call, head, act, out)
    tx, tw, to = A.tensor(q["x"]), A.tensor(q["w"]), A.tensor(out)
    if len(tx.dims) != 4 or len(to.dims) != 4 or tx.dims[0] != to.dims[0]:
        raise A.unsupported(call, f"x {list(tx.dims)} and out {list(to.dims)} are not "
                                  f"[N, C, H, W] with the same N")
    n, ic, ih, iw = tx.dims
    _, oc, oh, ow = to.dims
    kh, kw = _pair(A, ks, "kernel_size")
    sh, sw = _pair(A, st, "stride")
    ph, pw = _pair(A, pad, "padding")
    dh, dw = _pair(A, dil, "dilation")
    g = A.int(groups)
    if min(kh, kw, sh, sw, dh, dw, g) < 1 or min(ph, pw) < 0 or ic % g or oc % g:
        raise A.unsupported(call, f"kernel {kh}x{kw}, stride {sh},{sw}, padding {ph},{pw}, "
                                  f"dilation {dh},{dw}, groups {g} for IC {ic}, OC {oc}")
    if call.name == CONV_DW:
        if not (g == ic == oc) or len(tw.dims) != 3 or tuple(tw.dims[:2]) != (kh, kw) \
                or tw.dims[2] < oc:
            raise A.unsupported(call, f"depthwise needs groups = IC = OC ({g}, {ic}, {oc}) "
                                      f"and W [KH, KW, >= C], W is {list(tw.dims)}")
        mode, row = "taps", tw.dims[2]
    else:
        k = kh * kw * (ic // g)
        if len(tw.dims) != 2 or tw.dims[0] < oc or tw.dims[1] < k:
            raise A.unsupported(call, f"W {list(tw.dims)} is not [OC, >= KH*KW*IC/groups] "
                                      f"= [{oc}, >= {k}]")
        mode, row = ("rows" if tw.dims[1] % 4 == 0 else "bytes"), tw.dims[1]
    if transposed:
        want = tuple((i - 1) * s - 2 * p + d * (k_ - 1) + op + 1 for i, s, p, d, k_, op in
                     ((ih, sh, ph, dh, kh, out_pad[0]), (iw, sw, pw, dw, kw, out_pad[1])))
    else:
        want = tuple((i + 2 * p - d * (k_ - 1) - 1) // s + 1 for i, s, p, d, k_ in
                     ((ih, sh, ph, dh, kh), (iw, sw, pw, dw, kw)))
    if want != (oh, ow):
        raise PlanError(f"{A.op_name}: the convolution gives {list(want)} spatially, the "
                        f"output tensor has {[oh, ow]}")
    geo = Geometry(
        **q, batch=n, oc=oc, oh=oh, ow=ow, ic=ic, ih=ih, iw=iw,
        x_strides=(ic * ih * iw, ih * iw, iw, 1), kernel=(kh, kw), stride=(sh, sw),
        padding=(ph, pw), dilation=(dh, dw), groups=g, transposed=transposed,
        w_mode=mode, w_row=row)
    check_geometry(A, call, geo)
    return geo


def lower(L, call) -> None:
    lower_gemm(L, geometry(L.args, call))


def reference(R, call) -> None:
    gemm_reference(R, geometry(R.args, call))


UNITS = [OpUnit((CONV, CONV_PW, CONV_DW, CONV_T), lower, reference,
                {CONV: _SIG, CONV_PW: _SIG, CONV_DW: _SIG, CONV_T: _SIG_T})]
