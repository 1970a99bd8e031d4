"""aten.max.dim / aten.min.dim in their portable out form (`aten::max.dim_max`): the
extreme along one dim and its index, two outputs (values in the input's dtype, int64
indices). One invocation per output element scans its dim.

As torch: NaN propagates (value and index of the first NaN), and of equal extremes the
first index wins. f32 and i32 (int32/int64) inputs; the reference is exact.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..common import norm_dim
from ..registry import OpUnit
from ..storage import WGSL_TYPE, storage_of

_OPS = {"aten.max.dim_max": "max", "aten.min.dim_min": "min"}


def _parse(A, call) -> tuple[str, int, int, int, int, int, int]:
    """(op, x, values, indices, outer, rows, inner): the reduced dim as `rows`."""
    x, dim, keepdim, values, indices, _returned = call.args
    dims = tuple(A.tensor(x).dims)
    if not dims:
        raise A.unsupported(call, f"{call.name} of a 0-d tensor")
    d = norm_dim(A.int(dim), len(dims), A.op_name)
    if dims[d] == 0:
        raise PlanError(f"{A.op_name}: cannot reduce dim {d} of size 0")
    kept = dims[:d] + ((1,) if A.bool(keepdim) else ()) + dims[d + 1:]
    for v, what in ((values, "values"), (indices, "indices")):
        if tuple(A.tensor(v).dims) != kept:
            raise PlanError(f"{A.op_name}: {what} has dims {list(A.tensor(v).dims)}, the "
                            f"reduction of {list(dims)} over dim {d} gives {list(kept)}")
    return (_OPS[call.name], x, values, indices, math.prod(dims[:d]), dims[d],
            math.prod(dims[d + 1:]))


def _check_kinds(A, call, x: int, values: int, indices: int) -> None:
    kind = storage_of(A.tensor(x))
    if kind not in ("f32", "i32") or storage_of(A.tensor(values)) != kind:
        raise A.unsupported(call, f"{call.name} of {A.tensor(x).dtype.numpy_name} into "
                            f"{A.tensor(values).dtype.numpy_name} (float32 or int32/int64, the "
                            f"same for both)")
    if storage_of(A.tensor(indices)) != "i32":
        raise A.unsupported(call, f"indices of dtype {A.tensor(indices).dtype.numpy_name}")


def lower(L, call) -> None:
    op, x, values, indices, outer, rows, inner = _parse(L.args, call)
    _check_kinds(L.args, call, x, values, indices)
    kind = L.storage(x)
    n = outer * inner
    wg, row = L.grid(n)
    k = L.kernel("reduce/max_dim", op=op, n=n, rows=rows, inner=inner, kind=kind,
                 wgsl=WGSL_TYPE[kind], workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.buf(values), L.buf(indices)], wg)


def reference(R, call) -> None:
    op, x, values, indices, outer, rows, inner = _parse(R.args, call)
    _check_kinds(R.args, call, x, values, indices)
    v = R.get(x).reshape(outer, rows, inner)
    # numpy, like torch, picks the first NaN, else the first of equal extremes
    at = (np.argmax if op == "max" else np.argmin)(v, axis=1)
    best = np.take_along_axis(v, at[:, None, :], axis=1)
    R.set(values, best.reshape(R.args.tensor(values).dims))
    R.set(indices, at.astype(np.int64).reshape(R.args.tensor(indices).dims))


_SCHEMA = {name: "T i b T Ti L" for name in _OPS}
UNITS = [OpUnit(tuple(_OPS), lower, reference, _SCHEMA)]
