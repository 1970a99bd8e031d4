"""Comparisons eq/ne/lt/le/gt/ge, .Tensor (broadcasting) and .Scalar forms, to bool.

Operands compare in f32 when either side is a float (a float scalar included), else in exact
i32; the result is 0/1 in that type and stored one u32 per bool element. Float compares are
exact (no arithmetic before them); NaN operands compare as the adapter does.
"""

from __future__ import annotations

import math

from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of
from .binary import check_broadcast, lower_broadcast
from .unary import lower_unary, to_f32, to_storage_array

_CMP = ("eq", "ne", "lt", "le", "gt", "ge")
_OPS = {f"aten.{c}.{form}": c for c in _CMP for form in ("Tensor", "Scalar")}


def element(A, call) -> Element:
    """select(0, 1, a <op> b) in f32 or i32; the .Scalar form's scalar is a constant."""
    op = _OPS[call.name]
    a, b, out = call.args
    if call.name.endswith(".Scalar"):
        if A.tensor(a).numel != A.tensor(out).numel:
            raise A.unsupported(call, f"input has {A.tensor(a).numel} elements, output "
                                      f"{A.tensor(out).numel}")
        s = A.float(b)
        ty = "f32" if storage_of(A.tensor(a)) == "f32" or s != int(s) else "i32"
        if ty == "i32" and not -2 ** 31 <= s < 2 ** 31:
            raise A.unsupported(call, f"integer compare with {int(s)}, outside int32")
        # torch compares a float tensor with the scalar cast to its dtype (f32)
        if ty == "f32" and not math.isfinite(s):
            # No WGSL literal spells inf/NaN (SDPA's fully-masked-row test is eq(x, -inf)):
            # the scalar is runtime word 0.
            return Element(op, (a,), out, ty, {"scalar": "runtime"}, runtime=(s,))
        return Element(op, (a,), out, ty, {"scalar": to_f32(s) if ty == "f32" else int(s)})
    check_broadcast(A, call, (a, b), out)
    floats = "f32" in (storage_of(A.tensor(a)), storage_of(A.tensor(b)))
    return Element(op, (a, b), out, "f32" if floats else "i32", {"scalar": None})


def lower(L, call) -> None:
    e = element(L.args, call)
    (lower_unary if len(e.inputs) == 1 else lower_broadcast)(L, e)


def reference(R, call) -> None:
    e = element(R.args, call)
    ty = np.float32 if e.ty == "f32" else np.int32
    x = R.get(e.inputs[0]).astype(ty)
    scalar = e.runtime[0] if e.params["scalar"] == "runtime" else e.params["scalar"]
    y = ty(scalar) if len(e.inputs) == 1 else R.get(e.inputs[1]).astype(ty)
    to = R.args.tensor(e.out)
    f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
         "gt": np.greater, "ge": np.greater_equal}[e.op]
    r = np.broadcast_to(f(x, y), to.dims)
    R.set(e.out, to_storage_array(r.astype(np.int32), storage_of(to)))


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {n: "T T Tb" if n.endswith(".Tensor") else "T f Tb" for n in _OPS},
                element=element)]
