"""sym_size.int: a tensor's size along one dim as a SymInt (`aten.sym_size.int`).

Args: x, dim Int, out SymInt (or an Int where the exporter folded the size). Plans are
specialized to each call's dims (planner/dynamic.py), so the size is known when lowering: one
invocation copies it from a params word into the SymInt's 4-byte buffer, where consumers
(positions of RoPE, KV-cache writes) read it on the GPU. A folded Int needs no dispatch.
"""

from __future__ import annotations

from ...pte.graph import SymIntValue
from ..common import norm_dim
from ..registry import OpUnit

_NAME = "sym_size.int"


def _parse(A, call) -> tuple[int, int | None]:
    """(size, out SymInt or None for a folded Int)."""
    x, dim_id, out = call.args
    dims = A.tensor(x).dims
    if not dims:
        raise A.unsupported(call, "the size of a 0-d tensor has no dim to read")
    size = dims[norm_dim(A.int(dim_id), len(dims), A.op_name)]
    if isinstance(A.graph.values[out], SymIntValue):
        return size, out
    A.int(out)
    return size, None


def lower(L, call) -> None:
    size, out = _parse(L.args, call)
    if out is not None:
        k = L.kernel("layout/sym_size")
        L.dispatch(k, [L.params(size), L.buf(out)], (1, 1, 1))


def reference(R, call) -> None:
    size, out = _parse(R.args, call)
    if out is not None:
        R.set_scalar(out, size)


def shape(values, call) -> dict:
    """No tensor outputs: the size follows the specialized dims when lowered."""
    return {}


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T i *"}, shape=shape)]
