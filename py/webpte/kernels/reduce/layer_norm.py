"""aten.native_layer_norm.default: out, mean and rstd; one workgroup per row, two passes.

The numpy reference accumulates mean and variance in float64 and rounds the outputs to
float32.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from ...pte.graph import TensorValue
from .._np import np
from ..common import row_workgroup
from ..registry import OpUnit
from ._operands import f32_operands, optional, wrong_size

MAX_WORKGROUP = 256
ELEMENTS_PER_INVOCATION = 16  # fewer invocations per row: fewer barrier steps (lavapipe)
MAX_RESIDENT = 32  # rows up to MAX_WORKGROUP * this many elements are held in registers


def _parse(A, call):
    """(x, w, b, eps, out, mean, rstd, rows, length, why); w/b/mean/rstd may be None."""
    x, shape_id, w, b, eps, outs = call.args
    dims = tuple(A.tensor(x).dims)
    norm = A.ints(shape_id)
    ids = A.value_list(outs)
    if not ids:
        raise A.unsupported(call, "layer norm with an empty output list")
    out = ids[0]
    # mean / rstd: written when the graph gives them as tensors.
    extra = [i if i is not None and isinstance(A.graph.values[i], TensorValue) else None
             for i in (list(ids[1:3]) + [None, None])[:2]]
    w, b = optional(A, w), optional(A, b)
    length = math.prod(norm)
    rows = math.prod(dims) // length if length else 0
    why = None
    if not norm or len(norm) > len(dims) or dims[len(dims) - len(norm):] != tuple(norm):
        why = f"normalized_shape {list(norm)} is not the trailing dims of x {list(dims)}"
    elif tuple(A.tensor(out).dims) != dims:
        why = f"output {list(A.tensor(out).dims)} differs from x {list(dims)}"
    else:
        why = wrong_size(A, (("weight", w, length), ("bias", b, length),
                             ("mean", extra[0], rows), ("rstd", extra[1], rows)))
    return x, w, b, A.float(eps), out, extra[0], extra[1], rows, length, why


def lower(L, call) -> None:
    x, w, b, eps, out, mean, rstd, rows, length, why = _parse(L.args, call)
    if why:
        raise L.unsupported(why)
    present = f32_operands(L, (x, w, b, out, mean, rstd), "layer norm")
    if rows == 0:
        raise L.unsupported("layer norm of an empty tensor")
    wg = row_workgroup(length, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    strides = [wg >> i for i in range(1, wg.bit_length())]
    per_invocation = -(-length // wg)
    groups, grid_row = L.grid(rows, workgroup=1)
    k = L.kernel("reduce/layer_norm", rows=rows, length=length, eps=eps, workgroup=wg,
                 strides=strides, grid_row=grid_row, groups=1, hw=1, has_w=w is not None,
                 has_b=b is not None, has_mean=mean is not None, has_rstd=rstd is not None,
                 resident=per_invocation if per_invocation <= MAX_RESIDENT else 0)
    L.dispatch(k, [L.buf(v) for v in present], groups)


def reference(R, call) -> None:
    x, w, b, eps, out, mean, rstd, rows, length, why = _parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    v = R.get(x).astype(np.float64).reshape(rows, length)
    mu = v.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(((v - mu) ** 2).mean(axis=1, keepdims=True) + np.float32(eps))
    y = (v - mu) * r
    if w is not None:
        y = y * R.get(w).astype(np.float64).reshape(1, length)
    if b is not None:
        y = y + R.get(b).astype(np.float64).reshape(1, length)
    R.set(out, y.reshape(R.args.tensor(out).dims))
    for vid, val in ((mean, mu), (rstd, r)):
        if vid is not None:
            R.set(vid, val.reshape(R.args.tensor(vid).dims))


UNITS = [OpUnit(("aten.native_layer_norm.default",), lower, reference,
                {"aten.native_layer_norm.default": "T I T? T? f L"})]
