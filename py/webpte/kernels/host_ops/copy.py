"""aten.copy_.default (a portable kernel call writing a mutable buffer back: the KV cache
after its index_put): `self[...] = src` broadcast to self's dims and cast to its dtype,
written into self's own buffer (the op's result is self); aten.copy.default, its functional
form (`copy.out`, a buffer's slice assignment in a partitioner-less program), the same into
a new tensor. One gather (layout/gather.py)."""

from __future__ import annotations

from .._np import np
from ..elementwise.binary import broadcast_strides, check_broadcast
from ..layout.gather import computed, emit_gather, store, strided_map
from ..registry import OpUnit

_NAME = "aten.copy_.default"
_FUNCTIONAL = "aten.copy.default"


def _parse(A, call) -> tuple[int, int]:
    dst, src, _non_blocking, out = call.args
    if call.name == _FUNCTIONAL:
        if A.tensor(out).dims != A.tensor(dst).dims:
            raise A.unsupported(call, f"an output of dims {list(A.tensor(out).dims)} for a "
                                      f"self of {list(A.tensor(dst).dims)}")
        dst = out
    elif out != dst:
        raise A.unsupported(call, f"copy_ returns value {out}, not its self {dst}")
    check_broadcast(A, call, (src,), dst)
    return dst, src


def lower(L, call) -> None:
    dst, src = _parse(L.args, call)
    dims = L.tensor(dst).dims
    emit_gather(L, src, dst, strided_map(dims, broadcast_strides(L.tensor(src).dims, dims)),
                "copy_")


def reference(R, call) -> None:
    dst, src = _parse(R.args, call)
    store(R, dst, np.broadcast_to(computed(R.get(src)), R.args.tensor(dst).dims))


UNITS = [OpUnit((_NAME, _FUNCTIONAL), lower, reference,
                {_NAME: "T T b T", _FUNCTIONAL: "T T b T"})]
