"""Logical and bitwise ops and where: logical_and/or/xor/not, bitwise_and/or/xor/not,
aten.where.self (cond, a, b), broadcasting.

Logical ops test operands against zero (in f32 when one is a float, else i32) and give 0/1;
bitwise ops run on exact i32 (int or bool operands; bitwise_not of bool is logical not, as
in torch); where selects in the output's compute type.
"""

from __future__ import annotations

from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of
from .binary import check_broadcast, lower_broadcast
from .unary import lower_unary, to_storage_array

_OPS = {**{f"aten.logical_{op}.default": f"logical_{op}" for op in ("and", "or", "xor", "not")},
        **{f"aten.bitwise_{op}.Tensor": f"bitwise_{op}" for op in ("and", "or", "xor")},
        "aten.bitwise_not.default": "bitwise_not", "aten.where.self": "where"}


def element(A, call) -> Element:
    """The op for one element; `where`'s operands are (cond, a, b)."""
    op = _OPS[call.name]
    *ins, out = call.args
    check_broadcast(A, call, ins, out)
    kinds = [storage_of(A.tensor(v)) for v in ins]
    if op == "where":
        ty = "f32" if storage_of(A.tensor(out)) == "f32" else "i32"
    elif op.startswith("bitwise"):
        if "f32" in kinds:
            raise A.unsupported(call, f"{call.name} of a float32 tensor (only int and bool)")
        ty = "i32"
        if op == "bitwise_not" and kinds == ["bool"]:
            op = "logical_not"
    else:
        ty = "f32" if "f32" in kinds else "i32"
    if len(ins) == 1 and A.tensor(ins[0]).numel != A.tensor(out).numel:
        raise A.unsupported(call, f"input has {A.tensor(ins[0]).numel} elements, output "
                                  f"{A.tensor(out).numel}")
    return Element(op, tuple(ins), out, ty)


def lower(L, call) -> None:
    e = element(L.args, call)
    (lower_unary if len(e.inputs) == 1 else lower_broadcast)(L, e)


def apply(op: str, xs: list[np.ndarray]) -> np.ndarray:
    """The op on arrays already in its compute type; logical results as 0/1."""
    if op == "where":
        return np.where(xs[0] != 0, xs[1], xs[2])
    if op == "logical_not":
        return (xs[0] == 0).astype(np.int32)
    if op == "bitwise_not":
        return np.invert(xs[0])
    f = {"logical_and": np.logical_and, "logical_or": np.logical_or,
         "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and,
         "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}[op]
    r = f(xs[0], xs[1])
    return r.astype(np.int32) if op.startswith("logical") else r


def reference(R, call) -> None:
    e = element(R.args, call)
    ty = np.float32 if e.ty == "f32" else np.int32
    to = R.args.tensor(e.out)
    r = apply(e.op, [R.get(v).astype(ty) for v in e.inputs])
    R.set(e.out, to_storage_array(np.broadcast_to(r, to.dims), storage_of(to)))


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {**{n: "T T T" for n in _OPS}, "aten.logical_not.default": "T T",
                 "aten.bitwise_not.default": "T T", "aten.where.self": "T T T T"},
                element=element)]
