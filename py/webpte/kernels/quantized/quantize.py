"""quantized_decomposed.quantize_per_tensor.default: f32 -> int8 (or uint8), packed.

Semantics are torch's (`torch/ao/quantization/fx/_decomposed.py`), bit for bit:
`inv = 1.0 / scale` in double, which torch then rounds to f32 because it multiplies an
f32 tensor by a Python scalar; `q = clamp(round_half_even(x * inv) + zp, qmin, qmax)` with
every step in f32, then the conversion to the integer dtype. A NaN input gives an
unspecified value (torch's is undefined too).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ...errors import PlanError
from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of

__all__ = ["QuantParams", "f32", "quantize_params", "quantize_reference", "UNITS"]

NAME = "quantized_decomposed.quantize_per_tensor.default"
_RANGE = {"i8": (-128, 127), "u8": (0, 255)}


class QuantParams(NamedTuple):
    """What a quantize kernel reads from its params buffer; inv_scale is exactly an f32."""

    inv_scale: float
    zero_point: int
    quant_min: int
    quant_max: int


def f32(v: float) -> float:
    """`v` rounded to the nearest f32 (no numpy: planning also runs in Pyodide)."""
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:   # a graph's scale or alpha beyond f32
        raise PlanError(f"{v!r} is beyond float32") from None


def quantize_params(scale: float, zero_point: int, quant_min: int = -128,
                    quant_max: int = 127) -> QuantParams:
    """The parameters of a quantize kernel: f32(1/scale) as torch computes it."""
    if not 0 < scale < float("inf"):
        raise PlanError(f"quantization scale must be positive and finite, got {scale}")
    try:
        inv = f32(1.0 / scale)
    except OverflowError:
        raise PlanError(f"quantization scale {scale} is too small: 1/scale overflows f32") \
            from None
    return QuantParams(inv, int(zero_point), int(quant_min),
                       int(quant_max))


def quantize_reference(x: np.ndarray, params: QuantParams) -> np.ndarray:
    """numpy quantize with the kernel's f32 arithmetic; returns int32 values."""
    inv, zp, qmin, qmax = params
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.round(np.asarray(x, np.float32) * np.float32(inv)) + np.float32(zp)
        q = np.clip(q, np.float32(qmin), np.float32(qmax))
    return q.astype(np.int32)


def _parse(A, call):
    x, scale, zp, qmin, qmax, _dtype, out = call.args
    return x, quantize_params(A.float(scale), A.int(zp), A.int(qmin), A.int(qmax)), out


def element(A, call) -> Element:
    """quantize for one element: its parameters are runtime words (the params buffer), so
    every quantize, alone or at the end of a fused chain, renders the same source."""
    x, params, out = _parse(A, call)
    tx, to = A.tensor(x), A.tensor(out)
    if storage_of(tx) != "f32":
        raise A.unsupported(call, f"quantize of a {tx.dtype.name} input (only float32)")
    kind = storage_of(to)
    if kind not in _RANGE:
        raise A.unsupported(call, f"quantize to {to.dtype.name} (only int8 and uint8)")
    lo, hi = _RANGE[kind]
    if not lo <= params.quant_min <= params.quant_max <= hi:
        raise A.unsupported(call, f"quant range [{params.quant_min}, {params.quant_max}] "
                                    f"does not fit {to.dtype.name}")
    if tuple(tx.dims) != tuple(to.dims):
        raise A.unsupported(call, f"output dims {list(to.dims)} differ from input "
                                    f"{list(tx.dims)}")
    return Element("quantize", (x,), out, "f32", runtime=tuple(params))


def lower(L, call) -> None:
    e = element(L.args, call)
    (x,) = e.inputs
    n = max(1, L.tensor(x).numel)
    wg, row = L.grid(-(-n // 4))  # one packed output word per invocation
    # Scale and zero point come from a params buffer: one pipeline serves every quantize.
    k = L.kernel("quantized/quantize", n=n, workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.params(*e.runtime), L.buf(e.out)], wg)


def reference(R, call) -> None:
    x, params, out = _parse(R.args, call)
    R.set(out, quantize_reference(R.get(x), params))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "T f i i i * T"}, element=element)]
