"""slice_copy and split_with_sizes_copy: strided windows of one dim, one gather each; and
slice_scatter, a window written into a copy of its input.

A slice of dim d keeps the input's strides with d's stride times the step, starting at
start * stride(d); a split is one slice per output, at the running sum of the sizes.
slice_scatter (a buffer's slice assignment, `buf[a:b] = src`) copies self whole, then
writes src over positions [start, start + length) of dim d with the cat kernel's partial
form (shaders/layout/concat.wgsl.j2); steps other than 1 are refused.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from ..common import contiguous_strides, norm_dim
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE
from .gather import GatherMap, compute_type, computed, emit_gather, store, strided_map

_SLICE = "aten.slice_copy.Tensor"
_SPLIT = "aten.split_with_sizes_copy.default"
_SCATTER = "aten.slice_scatter.default"


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


def _scatter(A, call) -> tuple[int, int, int, int, int, int]:
    """(self, src, out, dim, start, length) of a slice_scatter of step 1."""
    x, src, dim_id, start_id, end_id, step_id, out = call.args
    dims = A.tensor(x).dims
    if not dims:
        raise PlanError(f"{A.op_name}: cannot scatter into a 0-d tensor")
    d = norm_dim(A.int(dim_id), len(dims), A.op_name)
    step = A.int(step_id)
    start, length = slice_bounds(None if A.is_null(start_id) else A.int(start_id),
                                 None if A.is_null(end_id) else A.int(end_id), step,
                                 dims[d], A.op_name)
    if step != 1:
        raise A.unsupported(call, f"step {step} (only 1)")
    _check(A, out, dims, "slice_scatter")
    want = dims[:d] + (length,) + dims[d + 1:]
    if tuple(A.tensor(src).dims) != tuple(want):
        raise PlanError(f"{A.op_name}: src of dims {list(A.tensor(src).dims)} for a window "
                        f"of {list(want)}")
    if A.tensor(src).dtype != A.tensor(x).dtype:
        raise A.unsupported(call, f"src of {A.tensor(src).dtype.name} into "
                                  f"{A.tensor(x).dtype.name} (no cast)")
    return x, src, out, d, start, length


def lower_scatter(L, call) -> None:
    x, src, out, d, start, length = _scatter(L.args, call)
    dims = L.tensor(out).dims
    emit_gather(L, x, out, strided_map(dims, contiguous_strides(dims)), "slice_scatter")
    n = L.tensor(out).numel
    if n == 0 or length == 0:
        return
    kind = L.storage(out)
    packed = kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    window = {"name": "x0", "binding": ("x0", WGSL_TYPE[kind], "read"), "lo": start,
              "hi": start + length, "size": length}
    k = L.kernel("layout/concat", inputs=[window], kind=kind, wgsl=WGSL_TYPE[kind],
                 ty=compute_type(kind), total=dims[d], inner=math.prod(dims[d + 1:]), n=n,
                 lo=start, hi=start + length, partial=True, packed=packed, workgroup=256,
                 row=row)
    L.dispatch(k, [L.buf(src), L.buf(out)], wg)


def reference_scatter(R, call) -> None:
    x, src, out, d, start, length = _scatter(R.args, call)
    v = computed(R.get(x)).copy()
    v[(slice(None),) * d + (slice(start, start + length),)] = computed(R.get(src))
    store(R, out, v)


UNITS = [OpUnit((_SLICE, _SPLIT), lower, reference,
                {_SLICE: "T i i? i? i T", _SPLIT: "T I i L"}),
         OpUnit((_SCATTER,), lower_scatter, reference_scatter, {_SCATTER: "T T i i? i? i T"})]
