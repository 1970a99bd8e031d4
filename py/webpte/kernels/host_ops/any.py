"""aten.any (.default over everything, .dim over one dim, .dims over adjacent dims) to bool:
one invocation per output element scans its reduced elements (NaN counts as true, as in
torch: NaN != 0)."""

from __future__ import annotations

import math

from ..common import norm_dim
from ..layout.gather import compute_type, computed
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of

_SCHEMA = {"aten.any.default": "T Tb", "aten.any.dim": "T i b Tb", "aten.any.dims": "T I? b Tb"}


def _parse(A, call) -> tuple[int, int, int, int, int]:
    """(x, out, outer, rows, inner): the reduced dims as one block of `rows`."""
    x, *rest = call.args
    out = rest[-1]
    dims = tuple(A.tensor(x).dims)
    rank = len(dims)
    if call.name == "aten.any.default" or A.is_null(rest[0]) or not rank:
        red = list(range(rank))
    else:
        red = sorted({norm_dim(d, rank, A.op_name) for d in A.ints(rest[0])})
    if red and red != list(range(red[0], red[-1] + 1)):
        raise A.unsupported(call, f"any over dims {red} that are not adjacent")
    if storage_of(A.tensor(x)) in PACKED:
        raise A.unsupported(call, "any of an int8/uint8 tensor")
    lo, hi = (red[0], red[-1] + 1) if red else (0, 0)
    kept = math.prod(dims) // max(1, math.prod(dims[lo:hi]))
    if A.tensor(out).numel != kept:
        raise A.unsupported(call, f"any of {list(dims)} over {red} into "
                            f"{list(A.tensor(out).dims)}")
    return x, out, math.prod(dims[:lo]), math.prod(dims[lo:hi]), math.prod(dims[hi:])


def lower(L, call) -> None:
    x, out, outer, rows, inner = _parse(L.args, call)
    n = outer * inner
    kind = L.storage(x)
    wg, row = L.grid(n)
    k = L.kernel("host_ops/any", n=n, outer=outer, rows=rows, inner=inner, in_kind=kind,
                 in_wgsl=WGSL_TYPE[kind], ty=compute_type(kind), workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.buf(out)], wg)


def reference(R, call) -> None:
    x, out, outer, rows, inner = _parse(R.args, call)
    v = computed(R.get(x)).reshape(outer, rows, inner)
    R.set(out, (v != 0).any(axis=1).reshape(R.args.tensor(out).dims))


UNITS = [OpUnit(tuple(_SCHEMA), lower, reference, _SCHEMA)]
