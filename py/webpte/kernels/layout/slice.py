"""slice_copy and split_with_sizes_copy: strided windows of one dim, one gather each.

A slice of dim d keeps the input's strides with d's stride times the step, starting at
start * stride(d); a split is one slice per output, at the running sum of the sizes.
"""

from __future__ import annotations

from ...errors import PlanError
from ..common import contiguous_strides, norm_dim
from ..registry import OpUnit
from .gather import GatherMap, computed, emit_gather, store, strided_map

_SLICE = "aten.slice_copy.Tensor"
_SPLIT = "aten.split_with_sizes_copy.default"


def slice_bounds(start: int | None, end: int | None, step: int, size: int,
                 op: str = "") -> tuple[int, int]:
    """(start, length) of torch's x[start:end:step] on a dim of `size`: negative bounds
    count from the end, out-of-range bounds clamp, an end before the start is empty."""
    if step <= 0:
        raise PlanError(f"{op}: slice step must be positive, got {step}")
    start = 0 if start is None else start
    end = size if end is None else end
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, -(-(end - start) // step)


def _window(dims, d: int, start: int, length: int, step: int) -> GatherMap:
    strides = contiguous_strides(dims)
    out_dims = dims[:d] + (length,) + dims[d + 1:]
    return strided_map(out_dims, strides[:d] + [strides[d] * step] + strides[d + 1:],
                       start * strides[d])


def _check(A, out: int, want, what: str) -> None:
    if tuple(A.tensor(out).dims) != tuple(want):
        raise PlanError(f"{A.op_name}: {what} gives dims {list(want)}, the output tensor has "
                        f"{list(A.tensor(out).dims)}")


def _plan(A, call) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(x, [(out, dim, start, length, step)...]) of the windows the call copies."""
    if call.name == _SLICE:
        x, dim_id, start_id, end_id, step_id, out = call.args
        dims = A.tensor(x).dims
        d = norm_dim(A.int(dim_id), len(dims), A.op_name)
        step = A.int(step_id)
        start, length = slice_bounds(None if A.is_null(start_id) else A.int(start_id),
                                     None if A.is_null(end_id) else A.int(end_id), step,
                                     dims[d], A.op_name)
        _check(A, out, dims[:d] + (length,) + dims[d + 1:], "slice")
        return x, [(out, d, start, length, step)]
    x, sizes_id, dim_id, outs_id = call.args
    dims = A.tensor(x).dims
    d = norm_dim(A.int(dim_id), len(dims), A.op_name)
    sizes, outs = A.ints(sizes_id), A.value_list(outs_id)
    if any(s < 0 for s in sizes) or sum(sizes) != dims[d] or len(sizes) != len(outs):
        raise PlanError(f"{A.op_name}: sizes {list(sizes)} do not split dim {d} of size "
                        f"{dims[d]} into {len(outs)} outputs")
    windows, start = [], 0
    for out, size in zip(outs, sizes):
        _check(A, out, dims[:d] + (size,) + dims[d + 1:], "split")
        windows.append((out, d, start, size, 1))
        start += size
    return x, windows


def lower(L, call) -> None:
    x, windows = _plan(L.args, call)
    dims = L.tensor(x).dims
    what = "slice" if call.name == _SLICE else "split"
    for out, d, start, length, step in windows:
        emit_gather(L, x, out, _window(dims, d, start, length, step), what)


def reference(R, call) -> None:
    x, windows = _plan(R.args, call)
    v = computed(R.get(x))
    for out, d, start, length, step in windows:
        idx = (slice(None),) * d + (slice(start, start + step * length, step),)
        store(R, out, v[idx])


UNITS = [OpUnit((_SLICE, _SPLIT), lower, reference,
                {_SLICE: "T i i? i? i T", _SPLIT: "T I i L"})]
