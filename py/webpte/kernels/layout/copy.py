"""Copies, casts and layout changes: clone, _clone_dim_order, alias_copy, prepack, _to_copy,
_to_dim_order_copy, view_copy, squeeze_copy, unsqueeze_copy, permute_copy, permute,
select_copy.

Buffers are contiguous, so clone/alias_copy/prepack/view/squeeze/unsqueeze (and casts that
keep the storage kind) are identity copies: the output shares the input's buffer when the
planner allows it (`L.alias`), else one gather kernel copies it. permute and select
are strided gathers; `aten.permute.default` (the view op, which ExecuTorch's WebGPU runtime
runs as permute_copy) writes the same permuted copy. Every path converts between storage
kinds like to_storage_array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import PlanError, UnsupportedOpError
from .._np import np
from ..common import contiguous_strides, norm_dim
from ..element import Element
from ..registry import OpUnit, written_in_place
from ..storage import storage_of
from .gather import GatherMap, compute_type, computed, emit_gather, store, strided_map

_CAST_OUT = "dim_order_ops._to_dim_order_copy.out"  # a portable kernel call between delegates
# clone(self, non_blocking, dim_order): a cast to the same dtype.
_CLONES = ("dim_order_ops._clone_dim_order.default", "dim_order_ops._clone_dim_order.out")
_CASTS = ("aten._to_copy.default", "dim_order_ops._to_dim_order_copy.default", _CAST_OUT,
          *_CLONES)
_ALIAS = "aten.alias_copy.default"
_COPIES = ("aten.clone.default", _ALIAS, "et_vk.prepack.default")
_VIEWS = ("aten.view_copy.default", "aten.squeeze_copy.dims")
_UNSQUEEZE = "aten.unsqueeze_copy.default"
_PERMUTES = ("aten.permute_copy.default", "aten.permute.default")
_SELECT = "aten.select_copy.int"


@dataclass(frozen=True)
class _Spec:
    """What one call does: `kind` is identity, permute (with perm) or select (dim, index)."""

    kind: str
    x: int
    out: int
    perm: tuple[int, ...] = ()
    dim: int = 0
    index: int = 0


def _unsupported(A, call, why: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"{A.op_name}: {why}", [call.name])


def _check_dims(A, got, want, what: str) -> None:
    if tuple(got) != tuple(want):
        raise PlanError(f"{A.op_name}: {what} gives dims {list(want)}, the output tensor has "
                        f"{list(got)}")


def _cast_spec(A, call) -> _Spec:
    x, *options, out = call.args
    rank = len(A.tensor(x).dims)
    for vid in options:
        v = A.graph.values[vid]
        if isinstance(v, tuple):  # the dim_order IntList
            if tuple(A.ints(vid)) != tuple(range(rank)):
                raise _unsupported(A, call, f"dim_order {list(v)} is not the identity "
                                   f"{list(range(rank))}: only contiguous outputs are supported")
        elif v is not None and type(v) is not bool:
            raise _unsupported(A, call, f"option value {v!r} (value {vid}) is not understood; "
                               f"dtype, layout, device and memory_format must be Null")
    _check_dims(A, A.tensor(out).dims, A.tensor(x).dims, "a cast")
    return _Spec("identity", x, out)


def _resolve_view(A, call, sizes: tuple[int, ...], numel: int) -> tuple[int, ...]:
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise PlanError(f"{A.op_name}: invalid view sizes {list(sizes)}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or numel % known:
            raise PlanError(f"{A.op_name}: cannot view {numel} elements as {list(sizes)}")
        sizes = tuple(numel // known if s == -1 else s for s in sizes)
    if math.prod(sizes) != numel:
        raise PlanError(f"{A.op_name}: cannot view {numel} elements as {list(sizes)}")
    return sizes


def _parse(A, call) -> _Spec:
    name = call.name
    if name in _CASTS:
        return _cast_spec(A, call)
    if name in ("et_vk.prepack.default", _ALIAS):
        x, out = call.args
        _check_dims(A, A.tensor(out).dims, A.tensor(x).dims, name.split(".")[1])
        return _Spec("identity", x, out)
    x, arg, *rest = call.args
    tx, to = A.tensor(x), A.tensor(rest[-1])
    out = rest[-1]
    if name == "aten.clone.default":
        if not A.is_null(arg):
            raise _unsupported(A, call, f"memory_format {A.graph.values[arg]!r} (only Null)")
        _check_dims(A, to.dims, tx.dims, "clone")
        return _Spec("identity", x, out)
    if name == "aten.view_copy.default":
        _check_dims(A, to.dims, _resolve_view(A, call, A.ints(arg), tx.numel), "view")
        return _Spec("identity", x, out)
    rank = len(tx.dims)
    if name == "aten.squeeze_copy.dims":
        drop = {norm_dim(d, rank, A.op_name) for d in A.ints(arg)} if rank else set()
        want = [n for d, n in enumerate(tx.dims) if not (d in drop and n == 1)]
        _check_dims(A, to.dims, want, "squeeze")
        return _Spec("identity", x, out)
    if name == _UNSQUEEZE:
        d = norm_dim(A.int(arg), rank + 1, A.op_name)
        _check_dims(A, to.dims, tx.dims[:d] + (1,) + tx.dims[d:], "unsqueeze")
        return _Spec("identity", x, out)
    if name in _PERMUTES:
        perm = tuple(norm_dim(d, rank, A.op_name) for d in A.ints(arg))
        if sorted(perm) != list(range(rank)):
            raise PlanError(f"{A.op_name}: dims {list(A.ints(arg))} are not a permutation "
                            f"of rank {rank}")
        _check_dims(A, to.dims, [tx.dims[p] for p in perm], "permute")
        return _Spec("permute", x, out, perm=perm)
    if rank == 0:
        raise PlanError(f"{A.op_name}: select needs an input of rank >= 1, got a scalar")
    dim = norm_dim(A.int(arg), rank, A.op_name)
    index, size = A.int(rest[0]), tx.dims[dim]
    if not -size <= index < size:
        raise PlanError(f"{A.op_name}: index {index} out of range for dim {dim} of size {size}")
    _check_dims(A, to.dims, tx.dims[:dim] + tx.dims[dim + 1:], "select")
    return _Spec("select", x, out, dim=dim, index=index % size)


def gather_map(spec: _Spec, in_dims) -> GatherMap:
    """The gather that performs `spec` on an input of dims `in_dims`."""
    strides = contiguous_strides(in_dims)
    if spec.kind == "permute":
        return strided_map([in_dims[p] for p in spec.perm], [strides[p] for p in spec.perm])
    if spec.kind == "select":
        d = spec.dim
        return strided_map(in_dims[:d] + in_dims[d + 1:], strides[:d] + strides[d + 1:],
                           spec.index * strides[d])
    return strided_map(in_dims, strides)


def cast_element(A, call) -> Element:
    """A cast for one element: the value itself, in its compute type."""
    spec = _parse(A, call)
    return Element("cast", (spec.x,), spec.out, compute_type(storage_of(A.tensor(spec.x))))


def _prepacked_state(A, call) -> bool:
    """A prepacked constant that a later op writes in place (a KV cache that llama's
    update_cache fills): state of its own, zero at load like the exported buffer, not a
    copy of the constant made again every call (the reference refuses non-zero data)."""
    return call.name == "et_vk.prepack.default" and call.args[-1] in written_in_place(A.graph)


def lower(L, call) -> None:
    spec = _parse(L.args, call)
    x, out = spec.x, spec.out
    if _prepacked_state(L.args, call):
        L.state_buf(out)
        return
    if spec.kind == "identity" and L.storage(x) == L.storage(out) and L.alias(out, x):
        return
    emit_gather(L, x, out, gather_map(spec, L.tensor(x).dims), spec.kind)


def reference(R, call) -> None:
    spec = _parse(R.args, call)
    if _prepacked_state(R.args, call):
        if spec.out not in R.state and np.any(R.get(spec.x)):
            raise PlanError(f"{R.args.op_name}: the prepacked state {spec.out} starts with "
                            "non-zero data; webpte starts state at zero (export the buffer "
                            "zero-initialised)")
        R.persistent(spec.out)
        return
    x = R.get(spec.x)
    if spec.kind == "permute":
        x = np.transpose(x, spec.perm)
    elif spec.kind == "select":
        x = np.take(x, spec.index, axis=spec.dim)
    store(R, spec.out, computed(x))


# Cast options (dtype, layout, device, pin_memory, non_blocking, memory_format / dim_order)
# are checked by _cast_spec, which says which forms are supported.
UNITS = [OpUnit(_CASTS, lower, reference,
                {**{n: "T * * * * * * T" for n in _CASTS[:2]},
                 **{n: "T * * T" for n in (_CAST_OUT, *_CLONES)}},
                element=cast_element),
         OpUnit(_COPIES + _VIEWS + (_UNSQUEEZE, *_PERMUTES, _SELECT), lower, reference,
                {"aten.clone.default": "T * T", _ALIAS: "T T", "et_vk.prepack.default": "T T",
                 **{n: "T I T" for n in _VIEWS + _PERMUTES}, _UNSQUEEZE: "T i T",
                 _SELECT: "T i i T"})]
