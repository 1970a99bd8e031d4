"""aten.index_put.default (the portable form of a KV cache's `index_copy_`):
out = self with `out[..., index[j], ...] = values[..., j, ...]` along one dim.

The form taken: `indices` holds Nulls and then one 1-D integer tensor (the dim it indexes),
values have self's dims with that dim replaced by the index length, accumulate False. Out
is self copied (one gather) and then the value rows scattered (one dispatch per value
element). Negative indices count from the end; out-of-range ones are clamped (torch raises,
a kernel cannot). Repeated indices leave one of their rows (torch: unspecified as well).
"""

from __future__ import annotations

import math

from .._np import np
from ..common import contiguous_strides
from ..layout.gather import compute_type, computed, emit_gather, store, strided_map
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of

_NAME = "aten.index_put.default"


def _parse(A, call) -> tuple[int, int, int, int, int, int, int, int]:
    """(self, index, values, out, outer, rows, inner, size)."""
    x, indices, values, accumulate, out = call.args
    if A.bool(accumulate):
        raise A.unsupported(call, "index_put with accumulate=True")
    ids = A.value_list(indices)  # an optional-tensor list: Nulls for the leading dims
    given = [k for k, v in enumerate(ids) if not A.is_null(v)]
    if len(given) != 1 or given[0] != len(ids) - 1:
        raise A.unsupported(call, "index_put takes Nulls then one index tensor (one dim)")
    d = given[0]
    index = ids[d]
    tx, ti, tv, to = (A.tensor(v) for v in (x, index, values, out))
    if storage_of(ti) != "i32" or len(ti.dims) != 1:
        raise A.unsupported(call, f"index tensor {ti.dtype.numpy_name}{list(ti.dims)} "
                            f"(a 1-D integer tensor only)")
    if d >= len(tx.dims) or tuple(to.dims) != tuple(tx.dims):
        raise A.unsupported(call, f"index_put on dim {d} of {list(tx.dims)} into "
                            f"{list(to.dims)}")
    want = tx.dims[:d] + (ti.dims[0],) + tx.dims[d + 1:]
    if tuple(tv.dims) != tuple(want):
        raise A.unsupported(call, f"values {list(tv.dims)} for rows {list(want)} (no "
                            f"broadcasting)")
    kinds = {storage_of(t) for t in (tx, tv, to)}
    if kinds & (PACKED | {"bool"}) or len(kinds) != 1:
        raise A.unsupported(call, f"index_put of {sorted(kinds)} (one of f32, i32)")
    return (x, index, values, out, math.prod(tx.dims[:d]), ti.dims[0],
            math.prod(tx.dims[d + 1:]), tx.dims[d])


def lower(L, call) -> None:
    x, index, values, out, outer, rows, inner, size = _parse(L.args, call)
    dims = L.tensor(x).dims
    if out != x:  # never aliased: self may be read again after the call
        emit_gather(L, x, out, strided_map(dims, contiguous_strides(dims)), "index_put self")
    n = outer * rows * inner
    if n == 0:
        return
    kind = L.storage(values)
    wg, row = L.grid(n)
    k = L.kernel("host_ops/index_put", n=n, outer=outer, rows=rows, inner=inner, size=size,
                 v_kind=kind, v_wgsl=WGSL_TYPE[kind], out_kind=L.storage(out),
                 out_wgsl=WGSL_TYPE[L.storage(out)], ty=compute_type(kind), workgroup=256,
                 row=row)
    L.dispatch(k, [L.buf(values), L.buf(index), L.buf(out)], wg)


def reference(R, call) -> None:
    x, index, values, out, outer, rows, inner, size = _parse(R.args, call)
    dst = computed(R.get(x)).reshape(outer, size, inner).copy()
    r = R.get(index).astype(np.int64)
    r = np.clip(np.where(r < 0, r + size, r), 0, size - 1)
    dst[:, r, :] = computed(R.get(values)).reshape(outer, rows, inner)
    store(R, out, dst)


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T * T b T"})]
