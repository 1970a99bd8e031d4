"""Reductions over any set of dims: amax, amin, argmax, argmin, sum, mean.

One template (reduce/reduce.wgsl.j2): one workgroup per output element, each invocation
folds a strided slice of the reduced elements, then a tree in workgroup memory. The index
map is data: the kept and the reduced dims, each collapsed where neighbours are of the same
kind, as (size, stride) lists, so any dims (innermost or not, several, all) reduce.

max/min propagate NaN and argmax/argmin pick the first of equal values (or the first NaN),
as torch does. The numpy reference sums in float64 and rounds to float32 (the kernel's f32
tree differs from it by rounding only); max/min/argmax/argmin are exact.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from .._np import np
from ..common import norm_dim, row_workgroup
from ..registry import OpUnit

MAX_WORKGROUP = 256
ELEMENTS_PER_INVOCATION = 16  # fewer invocations per row: fewer barrier steps (lavapipe)

# serialized name -> kernel op
_OPS = {"aten.amax.default": "max", "aten.amin.default": "min",
        "aten.argmax.default": "argmax", "aten.argmin.default": "argmin",
        "aten.sum.dim_IntList": "sum", "aten.mean.dim": "mean"}


def _parse(A, call):
    """(op, x, out, dims, axes, keepdim, why): `axes` the reduced dims of `dims` (sorted)."""
    op = _OPS[call.name]
    x, out = call.args[0], call.args[-1]
    dims = tuple(A.tensor(x).dims)
    rank = max(len(dims), 1)
    keepdim = A.bool(call.args[2])
    why = None
    if op in ("argmax", "argmin"):
        # dim Null: the index into the flattened tensor
        dim = None if A.is_null(call.args[1]) else A.int(call.args[1])
        axes = tuple(range(len(dims))) if dim is None else (norm_dim(dim, rank, call.name),)
        if dim is None and keepdim:
            why = "argmax/argmin with dim=None and keepdim=True"
    else:
        listed = () if A.is_null(call.args[1]) else A.ints(call.args[1])
        named = [norm_dim(d, rank, call.name) for d in listed]
        # an empty list (or Null) reduces every dim
        axes = tuple(sorted(set(named))) or tuple(range(len(dims)))
        if len(set(named)) != len(named):
            why = f"dims {list(listed)} name a dim twice"
        if op in ("sum", "mean") and not A.is_null(call.args[3]):
            why = f"dtype={A.int(call.args[3])} (only the input's float32 is supported)"
    axes = tuple(a for a in axes if a < len(dims))  # a 0-d tensor reduces nothing
    return op, x, out, dims, axes, keepdim, why


def _out_dims(dims, axes, keepdim) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(dims))
    return tuple(d for i, d in enumerate(dims) if i not in axes)


def index_map(dims, axes) -> tuple[list, list]:
    """(kept, reduced) lists of (size, stride), innermost first, of a contiguous tensor:
    size-1 dims dropped, neighbouring dims of the same kind merged into one."""
    groups: list[list] = []  # [reduced?, size, stride], outermost first
    stride = math.prod(dims)
    for i, d in enumerate(dims):
        stride //= d
        if d == 1:
            continue
        red = i in axes
        if groups and groups[-1][0] == red and groups[-1][2] == stride * d:
            groups[-1][1] *= d
            groups[-1][2] = stride
        else:
            groups.append([red, d, stride])
    kept = [(s, st) for red, s, st in reversed(groups) if not red]
    reduced = [(s, st) for red, s, st in reversed(groups) if red]
    return kept, reduced


def _check(A, call, parsed) -> str | None:
    op, x, out, dims, axes, keepdim, why = parsed
    if why:
        return why
    if math.prod(dims) == 0:
        return f"{call.name} of an empty tensor {list(dims)}"
    want = _out_dims(dims, axes, keepdim)
    got = tuple(A.tensor(out).dims)
    if got != want:
        return f"output {list(got)} is not the reduced shape {list(want)} of x {list(dims)}"
    return None


def lower(L, call) -> None:
    parsed = _parse(L.args, call)
    why = _check(L.args, call, parsed)
    if why:
        raise L.unsupported(why)
    op, x, out, dims, axes, keepdim, _ = parsed
    if L.storage(x) != "f32":
        raise L.unsupported(f"{op} runs on float32 input only, value {x} is "
                            f"{L.tensor(x).dtype.name}")
    if L.storage(out) != ("i32" if op in ("argmax", "argmin") else "f32"):
        raise L.unsupported(f"output {out} is {L.tensor(out).dtype.name}")
    kept, reduced = index_map(dims, axes)
    length = math.prod(s for s, _ in reduced)
    rows = math.prod(s for s, _ in kept)
    wg = row_workgroup(length, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    strides = [wg >> i for i in range(1, wg.bit_length())]
    groups, grid_row = L.grid(rows, workgroup=1)
    k = L.kernel("reduce/reduce", op=op, rows=rows, length=length, kept=kept, reduced=reduced,
                 workgroup=wg, strides=strides, grid_row=grid_row)
    L.dispatch(k, [L.buf(x), L.buf(out)], groups)


def reference(R, call) -> None:
    parsed = _parse(R.args, call)
    why = _check(R.args, call, parsed)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    op, x, out, dims, axes, keepdim, _ = parsed
    v = R.get(x).reshape(dims)
    if op in ("argmax", "argmin"):
        pick = np.argmax if op == "argmax" else np.argmin
        # numpy, like torch, returns the first NaN, else the first of equal extremes
        y = pick(v, axis=axes[0]) if len(axes) == 1 else pick(v.reshape(-1))
    elif op in ("max", "min"):
        y = (np.max if op == "max" else np.min)(v, axis=axes, keepdims=True)
    else:
        y = v.astype(np.float64).sum(axis=axes, keepdims=True)
        if op == "mean":
            y = y / math.prod(dims[a] for a in axes)
    R.set(out, np.asarray(y).reshape(R.args.tensor(out).dims))


_SCHEMA = {"aten.amax.default": "Tf I b Tf", "aten.amin.default": "Tf I b Tf",
           "aten.argmax.default": "Tf i? b Ti", "aten.argmin.default": "Tf i? b Ti",
           "aten.sum.dim_IntList": "T I? b i? T", "aten.mean.dim": "T I? b i? T"}
UNITS = [OpUnit(tuple(_OPS), lower, reference, _SCHEMA)]
