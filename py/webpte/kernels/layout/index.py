"""index_select and embedding: a gather whose axis along the selected dim reads its
coordinate from an int tensor (kernels/layout/gather.py, `Axis.bound`).

torch raises on an index outside the dim; a kernel cannot raise, so both the kernel and
this reference clamp indices into [0, size) (a negative index reads row 0, an index past
the end the last row).
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..common import contiguous_strides, norm_dim
from ..registry import OpUnit
from .gather import Axis, GatherMap, computed, emit_gather, store

_INDEX_SELECT = "aten.index_select.default"
_EMBEDDING = "aten.embedding.default"


def _plan(A, call) -> tuple[int, int, int, int, GatherMap]:
    """(x, index, out, gathered dim, map) with the output's dims checked."""
    if call.name == _INDEX_SELECT:
        x, dim_id, index, out = call.args
        dims = tuple(A.tensor(x).dims)
        ti = A.tensor(index)
        if len(ti.dims) > 1:
            raise PlanError(f"{A.op_name}: the index must be 0-d or 1-d, got {list(ti.dims)}")
        if not dims:
            raise A.unsupported(call, "index_select of a 0-d tensor")
        d = norm_dim(A.int(dim_id), len(dims), A.op_name)
        want = dims[:d] + (ti.numel,) + dims[d + 1:]
    else:
        x, index, _padding_idx, _scale_grad, _sparse, out = call.args  # training-only options
        dims = tuple(A.tensor(x).dims)
        if len(dims) != 2:
            raise PlanError(f"{A.op_name}: the weight must be 2-d, got {list(dims)}")
        d = 0
        want = tuple(A.tensor(index).dims) + dims[1:]
    if dims and dims[d] == 0 and A.tensor(index).numel:
        raise PlanError(f"{A.op_name}: cannot index dim {d} of size 0")
    got = tuple(A.tensor(out).dims)
    if got != want:
        raise PlanError(f"{A.op_name}: gives dims {list(want)}, the output tensor has "
                        f"{list(got)}")
    strides = contiguous_strides(dims)
    # Output viewed as (outer dims, index positions, inner dims).
    axes = [Axis(n, s) for n, s in zip(dims[:d], strides[:d])]
    axes.append(Axis(A.tensor(index).numel, strides[d], bound=dims[d]))
    axes.append(Axis(math.prod(dims[d + 1:]), 1))
    return x, index, out, d, GatherMap(tuple(axes))


def lower(L, call) -> None:
    x, index, out, _, gmap = _plan(L.args, call)
    emit_gather(L, x, out, gmap, call.name.split(".")[1], index=index)


def reference(R, call) -> None:
    x, index, out, d, _ = _plan(R.args, call)
    v = computed(R.get(x))
    idx = np.clip(R.get(index).reshape(-1).astype(np.int64), 0, max(v.shape[d] - 1, 0))
    store(R, out, np.take(v, idx, axis=d))


UNITS = [OpUnit((_INDEX_SELECT, _EMBEDDING), lower, reference,
                {_INDEX_SELECT: "T i Ti T", _EMBEDDING: "T Ti i b b T"})]
