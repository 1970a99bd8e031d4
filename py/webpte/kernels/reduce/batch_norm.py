"""aten._native_batch_norm_legit_no_training.default: inference batch norm with the running
statistics, out = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] over [N, C, *].

Per element, no reduction: one invocation per element. The ValueList's save_mean and
save_rstd are empty in this variant; a graph that wants them filled is unsupported. The
numpy reference does the kernel's float32 arithmetic in the same order.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from .._np import np
from ..registry import OpUnit
from ._operands import f32_operands, optional, wrong_size

_NAME = "aten._native_batch_norm_legit_no_training.default"
WORKGROUP = 256


def _parse(A, call):
    """(x, w, b, mean, var, eps, out, channels, inner, why); w/b None when absent."""
    x, w, b, mean, var, _momentum, eps, outs = call.args
    ids = A.value_list(outs)
    w, b = optional(A, w), optional(A, b)
    dims = tuple(A.tensor(x).dims)
    channels = dims[1] if len(dims) >= 2 else 0
    inner = math.prod(dims[2:])
    why = None
    if not ids:
        why = "an empty output list"
    elif len(dims) < 2 or math.prod(dims) == 0:
        why = f"x {list(dims)} is not a non-empty [N, C, ...] tensor"
    elif tuple(A.tensor(ids[0]).dims) != dims:
        why = f"output {list(A.tensor(ids[0]).dims)} differs from x {list(dims)}"
    elif any(A.tensor(v).numel for v in ids[1:]):
        why = "save_mean/save_rstd outputs that are not empty"
    else:
        why = wrong_size(A, [(name, vid, channels) for name, vid in (
            ("weight", w), ("bias", b), ("running_mean", mean), ("running_var", var))])
    return x, w, b, mean, var, A.float(eps), ids[0] if ids else None, channels, inner, why


def lower(L, call) -> None:
    x, w, b, mean, var, eps, out, channels, inner, why = _parse(L.args, call)
    if why:
        raise L.unsupported(why)
    present = f32_operands(L, (x, w, b, mean, var, out), "batch norm")
    n = L.tensor(x).numel
    groups, grid_row = L.grid(n, WORKGROUP)
    k = L.kernel("reduce/batch_norm", n=n, channels=channels, inner=inner, eps=eps,
                 workgroup=WORKGROUP, grid_row=grid_row, has_w=w is not None,
                 has_b=b is not None)
    L.dispatch(k, [L.buf(v) for v in present], groups)


def reference(R, call) -> None:
    x, w, b, mean, var, eps, out, channels, inner, why = _parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    f32 = np.float32
    shape = (-1, channels, inner)
    v = R.get(x).astype(f32).reshape(shape)
    rstd = f32(1) / np.sqrt(R.get(var).astype(f32) + f32(eps))
    y = (v - R.get(mean).astype(f32).reshape(1, channels, 1)) * rstd.reshape(1, channels, 1)
    if w is not None:
        y = y * R.get(w).astype(f32).reshape(1, channels, 1)
    if b is not None:
        y = y + R.get(b).astype(f32).reshape(1, channels, 1)
    R.set(out, y.reshape(R.args.tensor(out).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf? Tf? Tf Tf f f L"})]
