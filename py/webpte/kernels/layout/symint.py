"""et_vk.select_as_symint.default: one element of an int tensor -> a SymInt, read per call.

The SymInt lives in its own 4-byte i32 buffer (`L.buf(symint)`), so consumers
(RoPE, sdpa_with_kv_cache) read the position on the GPU at run time.
"""

from __future__ import annotations

from ..common import norm_dim
from ..registry import OpUnit

_NAME = "et_vk.select_as_symint.default"


def _parse(A, call) -> tuple[int, int, int, int]:
    """(x, element offset, out SymInt, dim size) with the index normalised."""
    x, dim_id, index_id, out = call.args
    A.symint(out)
    dims = A.tensor(x).dims or (1,)
    d = norm_dim(A.int(dim_id), len(dims), _NAME)
    index = A.int(index_id)
    size = dims[d]
    i = index + size if index < 0 else index
    return x, i, out, size


def lower(L, call) -> None:
    x, i, out, size = _parse(L.args, call)
    dims = L.tensor(x).dims or (1,)  # a 0-d x is treated as [1]
    if not 0 <= i < size:
        raise L.unsupported(f"index {call.args[2]} out of range for a dim of size {size}")
    if L.tensor(x).numel != size:  # other dims must be 1 for x[index] to be one element
        raise L.unsupported(f"selecting from {list(dims)} does not give one element")
    if L.storage(x) != "i32":
        raise L.unsupported(f"a SymInt from a {L.tensor(x).dtype.name} tensor (int32/int64 only)")
    k = L.kernel("layout/symint", index=i)
    L.dispatch(k, [L.buf(x), L.buf(out)], (1, 1, 1))


def reference(R, call) -> None:
    x, i, out, _ = _parse(R.args, call)
    R.set_scalar(out, int(R.get(x).reshape(-1)[i]))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T i i Y"})]
