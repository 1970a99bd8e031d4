"""aten.scalar_tensor.out, the portable kernel call `scalar_tensor.out(s, *, out)` (no
dtype/layout/device arguments, unlike the edge op the creation family runs): a 0-d tensor
holding `s` in the output's dtype, by the same fill element (fusible)."""

from __future__ import annotations

import math

from ..element import Element
from ..elementwise.binary import lower_broadcast
from ..elementwise.creation import fill_reference
from ..elementwise.unary import to_f32
from ..registry import OpUnit
from ..storage import storage_of

_NAME = "aten.scalar_tensor.out"


def element(A, call) -> Element:
    s, out = call.args
    v = A.float(s) if type(A.graph.values[s]) is not bool else float(A.graph.values[s])
    to = A.tensor(out)
    kind = storage_of(to)
    if kind == "f32":
        return Element("fill", (), out, "f32", runtime=(to_f32(v),))
    if kind == "bool":
        return Element("fill", (), out, "i32", runtime=(int(v != 0),))
    if kind != "i32" or not math.isfinite(v) or not -2 ** 31 <= v < 2 ** 31:
        raise A.unsupported(call, f"scalar_tensor {v} into a {to.dtype.numpy_name} tensor")
    return Element("fill", (), out, "i32", runtime=(int(v),))


def lower(L, call) -> None:
    lower_broadcast(L, element(L.args, call))


def reference(R, call) -> None:
    fill_reference(R, element(R.args, call))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "* T"}, element=element)]
