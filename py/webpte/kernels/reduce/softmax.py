"""aten._softmax.default and aten._log_softmax.default over any dim: numerically stable,
one workgroup per row; rows of up to MAX_WORKGROUP * MAX_RESIDENT elements are held in
registers (x read once, one exp per element), longer ones are walked three times.

The numpy reference computes exp(x - max) in float32, sums in float64 and divides (or
subtracts the sum's log from x - max), rounding to float32.
"""

from __future__ import annotations

import math

from .._np import np
from ..common import norm_dim, row_workgroup
from ..registry import OpUnit

MAX_WORKGROUP = 256
F32_MAX = 3.4028234663852886e38  # max(x) starts at the lowest finite f32
ELEMENTS_PER_INVOCATION = 32  # fewer invocations per row: fewer barrier steps (lavapipe)
MAX_RESIDENT = 32  # rows up to MAX_WORKGROUP * this many elements are held in registers


def _parse(A, call):
    x, dim, half_to_float, out = call.args
    dims = tuple(A.tensor(x).dims) or (1,)
    d = norm_dim(A.int(dim), len(dims), call.name)
    return x, out, dims, d, A.bool(half_to_float)


def lower(L, call) -> None:
    x, out, dims, d, half_to_float = _parse(L.args, call)
    if half_to_float:
        raise L.unsupported("half_to_float=True (float16 inputs) is not supported")
    L.require_f32("softmax", (x, out))
    if tuple(L.tensor(out).dims or (1,)) != dims:
        raise L.unsupported(f"output {list(L.tensor(out).dims)} differs from input {list(dims)}")
    length = dims[d]
    inner = math.prod(dims[d + 1:])
    rows = math.prod(dims) // length if length else 0
    if rows == 0:
        raise L.unsupported(f"softmax of an empty tensor {list(dims)}")
    wg = row_workgroup(length, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    strides = []
    s = wg // 2
    while s:
        strides.append(s)
        s //= 2
    per_invocation = -(-length // wg)
    groups, grid_row = L.grid(rows, workgroup=1)
    k = L.kernel("reduce/softmax", rows=rows, length=length, inner=inner, workgroup=wg,
                 strides=strides, grid_row=grid_row, lowest=-F32_MAX, log=call.name == _LOG,
                 resident=per_invocation if per_invocation <= MAX_RESIDENT else 0)
    L.dispatch(k, [L.buf(x), L.buf(out)], groups)


def reference(R, call) -> None:
    x, out, dims, d, half_to_float = _parse(R.args, call)
    v = R.get(x).reshape(dims).astype(np.float32)
    shifted = v - v.max(axis=d, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=d, keepdims=True, dtype=np.float64)
    y = shifted - np.log(s) if call.name == _LOG else e / s
    R.set(out, y.reshape(R.args.tensor(out).dims))


_LOG = "aten._log_softmax.default"
UNITS = [OpUnit(("aten._softmax.default", _LOG), lower, reference,
                {"aten._softmax.default": "T i b T", _LOG: "T i b T"})]
