"""Op argument schemas, checked for every call in one place before any unit reads them.

A unit declares, per serialized op name, a signature: one token per argument in order
(outputs last, as VK00 serializes them), separated by spaces:

    T   tensor             Tf float32, Ti int32/int64, Tq int8/uint8, Tb bool tensor
    i   Int                f  Double
    b   Bool               s  String
    I   IntList (or Int)   F  DoubleList
    L   ValueList of tensors (multi-output ops, tensor lists)
    Y   SymInt             n  Null            *  any value
    ?   suffix: the argument may also be Null

so a unit never meets a malformed graph as a failed tuple unpack: a call with the wrong
count or kind of arguments is a PlanError naming the node (`check_graph`).

Scalars are shared by Python equality (the Vulkan graph builder keeps one value per distinct
scalar), so a scalar argument is any scalar of the value it needs: an Int 2 may be the
Double 2.0 another op passed, a Bool the Int 1, a Double the Int 0.
"""

from __future__ import annotations

from ..errors import PlanError
from ..pte.graph import DType, Graph, OpCall, SymIntValue, TensorValue, ValueList

_TENSOR_DTYPES = {
    "Tf": {DType.FLOAT32},
    "Ti": {DType.INT32, DType.INT64},
    "Tq": {DType.INT8, DType.UINT8},
    "Tb": {DType.BOOL},
}
_WHAT = {"T": "a tensor", "Tf": "a float32 tensor", "Ti": "an int32/int64 tensor",
         "Tq": "an int8/uint8 tensor", "Tb": "a bool tensor", "i": "an Int",
         "f": "a Double", "b": "a Bool", "s": "a String", "I": "an IntList", "F": "a DoubleList",
         "L": "a ValueList of tensors", "Y": "a SymInt", "n": "Null", "*": "any value"}


def parse_signature(sig: str) -> tuple[tuple[str, bool], ...]:
    """'T T f? T' -> ((kind, nullable), ...); raises ValueError for unknown tokens."""
    out = []
    for tok in sig.split():
        nullable = tok.endswith("?")
        kind = tok[:-1] if nullable else tok
        if kind not in _WHAT:
            raise ValueError(f"unknown schema token {tok!r} in {sig!r}")
        out.append((kind, nullable))
    return tuple(out)


def integral(v) -> bool:
    """An Int, or a Bool or Double equal to one (scalars are shared by equality)."""
    return type(v) in (int, bool) or (type(v) is float and v.is_integer())


def _matches(graph: Graph, v, kind: str) -> bool:
    if kind == "*":
        return True
    if kind == "n":
        return v is None
    if kind[0] == "T":
        return isinstance(v, TensorValue) and (kind == "T" or v.dtype in _TENSOR_DTYPES[kind])
    if kind == "i":
        return integral(v)
    if kind == "f":
        return type(v) in (int, float, bool)
    if kind == "b":
        return type(v) in (bool, int, float) and v in (0, 1)
    if kind == "s":
        return type(v) is str
    if kind == "I":
        return integral(v) or (isinstance(v, tuple) and all(integral(x) for x in v))
    if kind == "F":
        return isinstance(v, tuple) and all(type(x) in (int, float) for x in v)
    if kind == "Y":
        return isinstance(v, SymIntValue)
    if kind == "L":
        return isinstance(v, ValueList) and all(
            0 <= i < len(graph.values) and isinstance(graph.values[i], TensorValue)
            for i in v.ids)
    return False


def check_call(graph: Graph, node: int, call: OpCall, signature) -> None:
    """Raise PlanError naming the node when `call`'s arguments do not fit `signature`."""
    where = f"{call.name} (node {node})"
    if len(call.args) != len(signature):
        raise PlanError(f"{where}: takes {len(signature)} arguments, the graph passes "
                        f"{len(call.args)}")
    n = len(graph.values)
    for k, (vid, (kind, nullable)) in enumerate(zip(call.args, signature)):
        if not 0 <= vid < n:
            raise PlanError(f"{where}: argument {k} is value {vid}, the graph has {n} values")
        v = graph.values[vid]
        if (v is None and nullable) or _matches(graph, v, kind):
            continue
        found = (f"a {v.dtype.numpy_name} tensor" if isinstance(v, TensorValue)
                 else f"{type(v).__name__} {v!r:.40}")
        raise PlanError(f"{where}: argument {k} (value {vid}) should be "
                        f"{_WHAT[kind]}{' or Null' if nullable else ''}, found {found}")


def check_graph(graph: Graph, schemas: dict) -> None:
    """Check every call of the chain against its op's schema (`schemas`: name -> parsed)."""
    for node, call in graph.unfused():
        sig = schemas.get(call.name)
        if sig is not None:
            check_call(graph, node, call, sig)
