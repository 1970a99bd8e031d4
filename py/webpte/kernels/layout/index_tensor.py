"""aten.index.Tensor: advanced indexing `out = x[i0, i1, ...]` by a list of integer index
tensors (Null entries take a whole dim), the index tensors broadcast together, as torch and
numpy do: when the indexed dims are adjacent the broadcast dims replace them in place,
otherwise they come first.

Negative indices count from the end; out-of-range ones are clamped (torch raises, a kernel
cannot). Boolean masks (a data-dependent output shape) are not supported.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..common import contiguous_strides
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of
from .gather import compute_type, computed, store

_NAME = "aten.index.Tensor"


def broadcast_dims(shapes) -> tuple[int, ...]:
    """The broadcast of `shapes` (numpy rules); PlanError when they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(sizes) > 1:
            raise PlanError(f"{_NAME}: index shapes {[list(s) for s in shapes]} do not "
                            f"broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _parse(A, call) -> tuple[int, int, list[tuple[int, int]], list[dict]]:
    """(x, out, [(index tensor, x dim)], output axes): each axis {size, stride into x,
    istrides: stride into each index tensor}."""
    x, indices, out = call.args
    dims = tuple(A.tensor(x).dims)
    ids = A.value_list(indices)
    if len(ids) > len(dims):
        raise PlanError(f"{A.op_name}: {len(ids)} indices for a {len(dims)}-d tensor")
    given = [(v, d) for d, v in enumerate(ids) if not A.is_null(v)]
    if not given:
        raise A.unsupported(call, "index without any index tensor")
    for v, _ in given:
        if storage_of(A.tensor(v)) != "i32":
            raise A.unsupported(call, f"index tensor of dtype {A.tensor(v).dtype.numpy_name} "
                                f"(int32/int64 only; boolean masks are not supported)")
    shapes = [tuple(A.tensor(v).dims) for v, _ in given]
    bdims = broadcast_dims(shapes)
    strides = contiguous_strides(dims)
    ibstrides = []  # per index tensor: its stride for each broadcast dim (0 where broadcast)
    for s in shapes:
        own = contiguous_strides(s)
        pad = len(bdims) - len(s)
        ibstrides.append([0 if k < pad or s[k - pad] == 1 else own[k - pad]
                          for k in range(len(bdims))])
    zeros = [0] * len(given)
    plain = [{"size": dims[d], "stride": strides[d], "istrides": zeros}
             for d in range(len(dims)) if d not in {d for _, d in given}]
    broadcast = [{"size": b, "stride": 0, "istrides": [st[k] for st in ibstrides]}
                 for k, b in enumerate(bdims)]
    first, last = given[0][1], given[-1][1]
    if last - first + 1 == len(given):       # adjacent: in place of the indexed dims
        axes = plain[:first] + broadcast + plain[first:]
    else:
        axes = broadcast + plain
    want = tuple(a["size"] for a in axes)
    got = tuple(A.tensor(out).dims)
    if got != want:
        raise PlanError(f"{A.op_name}: gives dims {list(want)}, the output tensor has "
                        f"{list(got)}")
    return x, out, given, axes


def lower(L, call) -> None:
    x, out, given, axes = _parse(L.args, call)
    n = L.tensor(out).numel
    if n == 0:
        return
    dims = L.tensor(x).dims
    strides = contiguous_strides(dims)
    in_kind, out_kind = L.storage(x), L.storage(out)
    packed = out_kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    index = [{"bound": dims[d], "stride": strides[d]} for _, d in given]
    k = L.kernel("layout/index_tensor", n=n, axes=axes, index=index, ty=compute_type(in_kind),
                 in_kind=in_kind, out_kind=out_kind, in_wgsl=WGSL_TYPE[in_kind],
                 out_wgsl=WGSL_TYPE[out_kind], out_packed=packed, workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), *[L.buf(v) for v, _ in given], L.buf(out)], wg)


def reference(R, call) -> None:
    x, out, given, _ = _parse(R.args, call)
    v = computed(R.get(x))
    key: list = [slice(None)] * v.ndim
    for t, d in given:
        i = R.get(t).astype(np.int64)
        key[d] = np.clip(np.where(i < 0, i + v.shape[d], i), 0, v.shape[d] - 1)
    store(R, out, v[tuple(key)])


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T * T"})]
