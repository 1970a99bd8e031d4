"""quantized_decomposed.dequantize_per_tensor.default: int8/uint8 -> f32, elementwise.

Semantics are torch's (`torch/ao/quantization/fx/_decomposed.py`): `(f32(q) - zp) * scale`,
where the Python scale meets an f32 tensor and so is rounded to f32 first; the subtraction
of two small integers is exact. As an `Element` it joins fused chains (a dequantize feeding
elementwise ops is one dispatch); its scale and zero point are runtime words of the params
buffer, so every dequantize renders the same source.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of
from .quantize import f32

__all__ = ["UNITS", "dequantize_reference"]

NAME = "quantized_decomposed.dequantize_per_tensor.default"
_RANGE = {"i8": (-128, 127), "u8": (0, 255)}


def _parse(A, call):
    # quant_min/quant_max only check the input's range in torch: no arithmetic.
    x, scale, zp, _qmin, _qmax, _dtype, _out_dtype, out = call.args
    return x, A.float(scale), A.int(zp), out


def element(A, call) -> Element:
    """dequantize for one element: scale (f32 bits) and zero point are runtime words."""
    x, scale, zp, out = _parse(A, call)
    tx, to = A.tensor(x), A.tensor(out)
    kind = storage_of(tx)
    if kind not in _RANGE:
        raise A.unsupported(call, f"dequantize of a {tx.dtype.name} input (only int8, uint8)")
    if storage_of(to) != "f32":
        raise A.unsupported(call, f"dequantize to {to.dtype.name} (only float32)")
    if tuple(tx.dims) != tuple(to.dims):
        raise A.unsupported(call, f"output dims {list(to.dims)} differ from input "
                                  f"{list(tx.dims)}")
    try:
        s = f32(scale)
    except PlanError:           # beyond f32
        s = math.inf
    if not math.isfinite(s):
        raise A.unsupported(call, f"dequantize scale {scale} is not a finite f32")
    if not -(1 << 24) < zp < (1 << 24):
        raise A.unsupported(call, f"dequantize zero point {zp} is not exact in f32")
    return Element("dequantize", (x,), out, "f32", runtime=(s, zp))


def lower(L, call) -> None:
    e = element(L.args, call)
    (x,) = e.inputs
    n = max(1, L.tensor(x).numel)
    wg, row = L.grid(n)
    k = L.kernel("quantized/dequantize", n=n, in_kind=L.storage(x), element=e.spec(),
                 workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.params(*e.runtime), L.buf(e.out)], wg)


def dequantize_reference(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """(f32(q) - zp) * f32(scale), every step in f32 as the kernel does."""
    return (q.astype(np.float32) - np.float32(zp)) * np.float32(scale)


def reference(R, call) -> None:
    x, scale, zp, out = _parse(R.args, call)
    R.set(out, dequantize_reference(R.get(x), scale, zp))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "Tq f i i i * * Tf"}, element=element)]
