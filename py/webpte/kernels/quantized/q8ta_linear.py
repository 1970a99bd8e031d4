"""et_vk.q8ta_linear / q8ta_linear_gemv: int8 x [..., K] . W^T int8 [N, K] -> int8 [..., N].

Args: x, input scale, zero point, W int8 [N, K] (row-major, unpadded), weight_sums int32
[N4], weight_scales f32 [N4], output scale, zero point, bias f32 [N4] or Null, activation
("none" / "relu"), out (N4 = N padded to a multiple of 4; the first N entries are read).
The partitioner picks the gemv name when x has one row; both compute the same.

The arithmetic is q8ta_gemm.py's with the linear as a 1x1 convolution over x [M, K, 1, 1]:
int32 dot products, minus zp * weight_sums[n], then f32 scale, bias, relu and torch's
quantize (custom_ops_lib.py's reference: dequantize, float linear, quantize).
"""

from __future__ import annotations

from ..registry import OpUnit
from .q8ta_common import gemm_operands
from .q8ta_gemm import Geometry, check_geometry, gemm_reference, lower_gemm

LINEAR = "et_vk.q8ta_linear.default"
GEMV = "et_vk.q8ta_linear_gemv.default"
_SIG = "Tq f i Tq Ti Tf f i Tf? s Tq"


def geometry(A, call) -> Geometry:
    """The call as a Geometry (checked: shapes, dtypes, parameters)."""
    *head, act, out = call.args
    q = gemm_operands(A, call, head, act, out)
    tx, tw, to = A.tensor(q["x"]), A.tensor(q["w"]), A.tensor(out)
    if len(tw.dims) != 2 or not tx.dims or not to.dims or tx.dims[-1] != tw.dims[1] \
            or to.dims[-1] != tw.dims[0] or tuple(tx.dims[:-1]) != tuple(to.dims[:-1]):
        raise A.unsupported(call, f"shapes x {list(tx.dims)}, W {list(tw.dims)}, out "
                                  f"{list(to.dims)} are not x[..., K] W[N, K] -> out[..., N]")
    n, k = tw.dims
    geo = Geometry(
        **q, batch=tx.numel // k if k else 0, oc=n, oh=1, ow=1, ic=k, ih=1, iw=1,
        x_strides=(k, 1, 0, 0), kernel=(1, 1), stride=(1, 1), padding=(0, 0),
        dilation=(1, 1), groups=1, transposed=False,
        w_mode="rows" if k % 4 == 0 else "bytes", w_row=k)
    check_geometry(A, call, geo)
    return geo


def lower(L, call) -> None:
    lower_gemm(L, geometry(L.args, call))


def reference(R, call) -> None:
    gemm_reference(R, geometry(R.args, call))


UNITS = [OpUnit((LINEAR, GEMV), lower, reference, {LINEAR: _SIG, GEMV: _SIG})]
