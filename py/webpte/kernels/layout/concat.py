"""aten.cat: the output gathers each element from the input whose slab of the cat dim holds
it (shaders/layout/concat.wgsl.j2).

A kernel binds at most 8 storage buffers, so one dispatch reads at most 7 inputs; more
inputs take one dispatch per group of 7, each writing only its group's positions (a packed
int8 output word is rewritten whole, keeping the bytes of other groups).
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..common import norm_dim
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE
from .gather import compute_type, computed, store

_CAT = "aten.cat.default"
_MAX_INPUTS = 7  # + the output: WebGPU's default maxStorageBuffersPerShaderStage is 8


def _plan(A, call) -> tuple[list[tuple[int, int]], int, int]:
    """([(input, size along dim)...] without empty inputs, dim, out)."""
    list_id, dim_id, out = call.args
    dims = tuple(A.tensor(out).dims)
    if not dims:
        raise PlanError(f"{A.op_name}: cannot concatenate into a 0-d tensor")
    d = norm_dim(A.int(dim_id), len(dims), A.op_name)
    parts, total = [], 0
    for x in A.value_list(list_id):
        xd = tuple(A.tensor(x).dims)
        if xd == (0,) and len(dims) != 1:
            continue  # torch skips legacy empty 1-d inputs of any rank
        if len(xd) != len(dims) or xd[:d] + xd[d + 1:] != dims[:d] + dims[d + 1:]:
            raise PlanError(f"{A.op_name}: input dims {list(xd)} do not fit output "
                            f"{list(dims)} along dim {d}")
        total += xd[d]
        if xd[d]:
            parts.append((x, xd[d]))
    if total != dims[d]:
        raise PlanError(f"{A.op_name}: inputs give {total} along dim {d}, the output has "
                        f"{dims[d]}")
    return parts, d, out


def lower(L, call) -> None:
    parts, d, out = _plan(L.args, call)
    to = L.tensor(out)
    n = to.numel
    if n == 0:
        return
    kind = L.storage(out)
    for x, _ in parts:
        if L.storage(x) != kind:
            raise L.unsupported(f"inputs of storage {L.storage(x)} into a {kind} output "
                                f"(cat casts no input)")
    total, inner = to.dims[d], math.prod(to.dims[d + 1:])
    packed = kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    groups = [parts[k:k + _MAX_INPUTS] for k in range(0, len(parts), _MAX_INPUTS)]
    lo = 0
    for group in groups:
        inputs, hi = [], lo
        for k, (_, size) in enumerate(group):
            inputs.append({"name": f"x{k}", "binding": (f"x{k}", WGSL_TYPE[kind], "read"),
                           "lo": hi, "hi": hi + size, "size": size})
            hi += size
        kid = L.kernel("layout/concat", inputs=inputs, kind=kind, wgsl=WGSL_TYPE[kind],
                     ty=compute_type(kind), total=total, inner=inner, n=n, lo=lo, hi=hi,
                     partial=len(groups) > 1, packed=packed, workgroup=256, row=row)
        L.dispatch(kid, [L.buf(x) for x, _ in group] + [L.buf(out)], wg)
        lo = hi


def reference(R, call) -> None:
    parts, d, out = _plan(R.args, call)
    if not parts:
        store(R, out, np.zeros(R.args.tensor(out).dims, np.float32))
        return
    store(R, out, np.concatenate([computed(R.get(x)) for x, _ in parts], axis=d))


UNITS = [OpUnit((_CAT,), lower, reference, {_CAT: "L i T"})]
