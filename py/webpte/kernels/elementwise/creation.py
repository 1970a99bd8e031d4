"""Creation ops: full, full_like, zeros, zeros_like, ones, ones_like, scalar_tensor.

The output tensor's dtype and dims are the truth (the dtype/layout/device/pin_memory/
memory_format arguments only restate them). The fill value is a runtime word of the
kernel's params buffer, so fills that differ only in value share one pipeline, and values
with no WGSL literal (inf, NaN) need none. Floats fill with the value rounded to f32;
integer outputs with it truncated toward zero, bool with value != 0.
"""

from __future__ import annotations

import math

from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of
from .binary import lower_broadcast
from .unary import to_f32, to_storage_array

# op -> (index of the fill value argument or a fixed value, schema)
_OPS = {
    "aten.full.default": (1, "I * i? i? * b? T"),
    "aten.full_like.default": (1, "T * i? i? * b? i? T"),
    "aten.zeros.default": (0.0, "I i? i? * b? T"),
    "aten.zeros_like.default": (0.0, "T i? i? * b? i? T"),
    "aten.ones.default": (1.0, "I i? i? * b? T"),
    "aten.ones_like.default": (1.0, "T i? i? * b? i? T"),
    "aten.scalar_tensor.default": (0, "* i? i? * b? T"),
    # The portable kernels' forms (a partitioner-less program): `full.out(size, fill, out)`,
    # `full_like.out(self, fill, memory_format, out)`.
    "aten.full.out": (1, "I * T"),
    "aten.full_like.out": (1, "T * i? T"),
}
_SIZED = ("aten.full.default", "aten.full.out", "aten.zeros.default", "aten.ones.default")


def _fill_value(A, call) -> float:
    where = _OPS[call.name][0]
    if isinstance(where, float):
        return where
    v = A.graph.values[call.args[where]]
    if type(v) not in (bool, int, float):
        raise A.unsupported(call, f"fill value {v!r:.40} is not a number")
    return float(v)


def element(A, call) -> Element:
    """No operands: the value of runtime word 0 (f32 bits or i32) for every element."""
    out = call.args[-1]
    to = A.tensor(out)
    if call.name in _SIZED:
        size = A.ints(call.args[0])
        if math.prod(size) != to.numel:
            raise A.unsupported(call, f"size {list(size)} for an output of dims {list(to.dims)}")
    v = _fill_value(A, call)
    kind = storage_of(to)
    if kind == "f32":
        return Element("fill", (), out, "f32", runtime=(to_f32(v),))
    if kind == "bool":
        return Element("fill", (), out, "i32", runtime=(int(v != 0),))
    if not math.isfinite(v) or not -2 ** 31 <= v < 2 ** 31:
        raise A.unsupported(call, f"fill value {v} for an integer tensor (outside int32)")
    return Element("fill", (), out, "i32", runtime=(int(v),))


def fill_reference(R, e: Element) -> None:
    """A fill element's output: its runtime value everywhere, stored as the kernel stores it
    (also the reference of scalar_tensor.out, kernels/host_ops/scalar_tensor.py)."""
    to = R.args.tensor(e.out)
    ty = np.float32 if e.ty == "f32" else np.int32
    R.set(e.out, to_storage_array(np.full(to.dims, e.runtime[0], ty), storage_of(to)))


def lower(L, call) -> None:
    lower_broadcast(L, element(L.args, call))


def reference(R, call) -> None:
    fill_reference(R, element(R.args, call))


UNITS = [OpUnit(tuple(_OPS), lower, reference, {n: s for n, (_, s) in _OPS.items()},
                element=element)]
