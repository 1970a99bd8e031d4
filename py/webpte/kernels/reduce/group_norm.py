"""aten.native_group_norm.default: out, mean and rstd of each (sample, group).

A group of a contiguous [N, C, *] tensor is a run of C/group * HxW elements, so group norm is
the layer norm kernel (reduce/layer_norm.wgsl.j2) over N*group rows, with weight and bias
indexed by the element's channel. The numpy reference accumulates mean and variance in
float64 and rounds the outputs to float32.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from .._np import np
from ..common import row_workgroup
from ..registry import OpUnit
from ._operands import f32_operands, optional, wrong_size
from .layer_norm import ELEMENTS_PER_INVOCATION, MAX_WORKGROUP

_NAME = "aten.native_group_norm.default"


def _parse(A, call):
    """(x, w, b, eps, outs, n, c, hw, groups, why); w/b None when absent, outs (out, mean,
    rstd) with None for entries the graph leaves out."""
    x, w, b, n_id, c_id, hw_id, g_id, eps, outs = call.args
    n, c, hw, groups = (A.int(v) for v in (n_id, c_id, hw_id, g_id))
    ids = (list(A.value_list(outs)) + [None, None, None])[:3]
    w, b = optional(A, w), optional(A, b)
    dims = tuple(A.tensor(x).dims)
    why = None
    if min(n, c, hw, groups) <= 0 or c % groups:
        why = f"N={n}, C={c}, HxW={hw}, group={groups}: C must be a positive multiple of group"
    elif math.prod(dims) != n * c * hw or len(dims) < 2 or dims[:2] != (n, c):
        why = f"x {list(dims)} is not [N={n}, C={c}, ...] with HxW={hw}"
    elif ids[0] is None or tuple(A.tensor(ids[0]).dims) != dims:
        why = f"output is not the shape of x {list(dims)}"
    else:
        why = wrong_size(A, (("weight", w, c), ("bias", b, c), ("mean", ids[1], n * groups),
                             ("rstd", ids[2], n * groups)))
    return x, w, b, A.float(eps), ids, n, c, hw, groups, why


def lower(L, call) -> None:
    x, w, b, eps, (out, mean, rstd), n, c, hw, groups, why = _parse(L.args, call)
    if why:
        raise L.unsupported(why)
    present = f32_operands(L, (x, w, b, out, mean, rstd), "group norm")
    rows, length = n * groups, c // groups * hw
    wg = row_workgroup(length, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    strides = [wg >> i for i in range(1, wg.bit_length())]
    grid, grid_row = L.grid(rows, workgroup=1)
    k = L.kernel("reduce/layer_norm", rows=rows, length=length, eps=eps, workgroup=wg,
                 strides=strides, grid_row=grid_row, groups=groups, hw=hw,
                 has_w=w is not None, has_b=b is not None, has_mean=mean is not None,
                 has_rstd=rstd is not None)
    L.dispatch(k, [L.buf(v) for v in present], grid)


def reference(R, call) -> None:
    x, w, b, eps, (out, mean, rstd), n, c, hw, groups, why = _parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    v = R.get(x).astype(np.float64).reshape(n, groups, c // groups * hw)
    mu = v.mean(axis=2, keepdims=True)
    r = 1.0 / np.sqrt(((v - mu) ** 2).mean(axis=2, keepdims=True) + np.float32(eps))
    y = ((v - mu) * r).reshape(n, c, hw)
    if w is not None:
        y = y * R.get(w).astype(np.float64).reshape(1, c, 1)
    if b is not None:
        y = y + R.get(b).astype(np.float64).reshape(1, c, 1)
    R.set(out, y.reshape(R.args.tensor(out).dims))
    for vid, val in ((mean, mu), (rstd, r)):
        if vid is not None:
            R.set(vid, val.reshape(R.args.tensor(vid).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf? Tf? i i i i f L"})]
