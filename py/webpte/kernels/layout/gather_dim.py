"""aten.gather.default: pick along one dim at positions an index tensor holds per element.

Args: x [d0, .., dn], dim Int, index int [i0, .., in] (same rank, `ik <= dk` for k != dim),
sparse_grad Bool (training only), out [i0, .., in] of x's dtype:
`out[p] = x[p with coordinate dim replaced by index[p]]` (torch.gather; ExecuTorch's WebGPU
runtime reads the same element). One gather (kernels/layout/gather.py) whose axis `dim` is
driven by the index at each output element. torch raises on an index outside
[0, d_dim); a kernel cannot, so kernel and reference clamp it into that range.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..common import contiguous_strides, norm_dim
from ..registry import OpUnit
from .gather import Axis, GatherMap, computed, emit_gather, store

_NAME = "aten.gather.default"


def _plan(A, call) -> tuple[int, int, int, int, GatherMap]:
    """(x, index, out, dim, map) after checking the shapes."""
    x, dim_id, index, _sparse_grad, out = call.args
    dims, idims = tuple(A.tensor(x).dims), tuple(A.tensor(index).dims)
    if not dims:
        raise A.unsupported(call, "gather from a 0-d tensor")
    d = norm_dim(A.int(dim_id), len(dims), A.op_name)
    if len(idims) != len(dims) or any(i > n for k, (i, n) in enumerate(zip(idims, dims))
                                      if k != d):
        raise PlanError(f"{A.op_name}: index {list(idims)} must have the rank of x "
                        f"{list(dims)} and no larger size outside dim {d}")
    if tuple(A.tensor(out).dims) != idims:
        raise PlanError(f"{A.op_name}: gives dims {list(idims)}, the output tensor has "
                        f"{list(A.tensor(out).dims)}")
    if dims[d] == 0 and A.tensor(index).numel:
        raise PlanError(f"{A.op_name}: cannot gather from dim {d} of size 0")
    strides = contiguous_strides(dims)
    axes = tuple(Axis(n, s, bound=dims[d], per_element=True) if k == d else Axis(n, s)
                 for k, (n, s) in enumerate(zip(idims, strides)))
    return x, index, out, d, GatherMap(axes)


def lower(L, call) -> None:
    x, index, out, _, gmap = _plan(L.args, call)
    emit_gather(L, x, out, gmap, "gather", index=index)


def reference(R, call) -> None:
    x, index, out, d, _ = _plan(R.args, call)
    v = computed(R.get(x))
    idx = np.clip(R.get(index).astype(np.int64), 0, max(v.shape[d] - 1, 0))
    # take_along_axis needs the other dims equal: crop x to the index's sizes first.
    crop = tuple(slice(None) if k == d else slice(0, n) for k, n in enumerate(idx.shape))
    store(R, out, np.take_along_axis(v[crop], idx, axis=d))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T i Ti b T"})]
