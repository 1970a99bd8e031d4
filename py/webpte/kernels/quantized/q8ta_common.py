"""What the statically quantized int8 activation ops (`et_vk.q8ta_*`) share.

Every q8ta op is defined by its torch reference (executorch/backends/vulkan/custom_ops_lib.py)
as dequantize -> float op -> quantize, all in f32:
    dequantize: f32(x - zp) * f32(scale)                      (torch's dequantize_per_tensor)
    quantize:   clamp(round_half_even(y * f32(1/scale)) + zp, -128, 127)   (quantize.py)
Int8 activations are stored like every other webpte tensor: contiguous, four per u32
word. The Vulkan partitioner tags them with packed layouts (PACKED_INT8_4W4C, ...), which
only place data inside the Vulkan runtime; the serialized constants are plain row-major.

Kernels keep every product that an add follows behind `opaque_f32` (a runtime zero word
of the params buffer), so no compiler can contract it into an fma: int8 results are then
bit-exact against the numpy reference.
"""

from __future__ import annotations

from ...errors import UnsupportedOpError
from .._np import np
from .quantize import QuantParams, f32, quantize_params, quantize_reference

__all__ = ["QMIN", "QMAX", "requant_params", "require_int8", "check_zero_point",
           "dequantize_ref", "requant_ref", "gemm_operands"]

QMIN, QMAX = -128, 127


def requant_params(scale: float, zero_point: int) -> QuantParams:
    """The output quantization of a q8ta op: torch's f32(1/scale), range [-128, 127]."""
    return quantize_params(scale, zero_point, QMIN, QMAX)


def require_int8(A, call, vids) -> None:
    """Raise UnsupportedOpError unless every tensor of `vids` is int8 (not uint8)."""
    for vid in vids:
        t = A.tensor(vid)
        if t.dtype.numpy_name != "int8":
            raise UnsupportedOpError(f"{A.op_name}: value {vid} is {t.dtype.numpy_name}; "
                                     f"q8ta ops take and give int8 only", [call.name])


def gemm_operands(A, call, head, act: int, out: int) -> dict:
    """The quantized operands the q8ta GEMMs (linear, conv) share, as Geometry fields:
    `head` is their first nine arguments (x, input scale and zero point, W, weight sums,
    weight scales, output scale and zero point, bias); `act` the activation's id."""
    x, s_in, zp_in, w, sums, scales, s_out, zp_out, bias = head
    require_int8(A, call, (x, w, out))
    activation = A.str(act)
    if activation not in ("none", "relu"):
        raise A.unsupported(call, f"activation {activation!r} (only 'none' and 'relu')")
    return dict(x=x, w=w, sums=sums, scales=scales, bias=None if A.is_null(bias) else bias,
                out=out, in_scale=A.float(s_in), in_zp=A.int(zp_in), out_scale=A.float(s_out),
                out_zp=A.int(zp_out), relu=activation == "relu")


def check_zero_point(A, call, zp: int) -> None:
    """Zero points of int8 data lie in [-128, 127] (they pad convolutions as int8 lanes)."""
    if not QMIN <= zp <= QMAX:
        raise UnsupportedOpError(f"{A.op_name}: zero point {zp} outside [-128, 127]",
                                 [call.name])


def dequantize_ref(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """torch's dequantize_per_tensor in f32: (f32(q) - zp) * f32(scale)."""
    return (q.astype(np.float32) - np.float32(zero_point)) * np.float32(f32(scale))


def requant_ref(y: np.ndarray, params: QuantParams) -> np.ndarray:
    """quantize_per_tensor of f32 `y` as int8 values (int32 array)."""
    return quantize_reference(y, params)
