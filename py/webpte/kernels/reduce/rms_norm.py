"""et_vk.rms_norm.default: `x * rsqrt(mean(x^2) + eps) * w` over the last dim.

One workgroup per row: each invocation sums squares over a strided slice, a tree
reduction in workgroup memory gives the row's sum. The reference accumulates the
sum of squares in float64 and applies the scale in float32, as the kernel does.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit

_NAME = "et_vk.rms_norm.default"
MAX_GROUPS = 65535  # rows beyond this fold into workgroup y


def workgroup_size(d: int) -> int:
    """A power of two in [32, 256] covering the row where possible."""
    n = 32
    while n < d and n < 256:
        n *= 2
    return n


def _parse(A, call):
    x, w, eps_id, out = call.args
    return x, w, A.float(eps_id), out


def lower(L, call) -> None:
    x, w, eps, out = _parse(L.args, call)
    tx, tw, to = L.tensor(x), L.tensor(w), L.tensor(out)
    if not tx.dims:
        raise L.unsupported("rms_norm of a 0-d tensor")
    d = tx.dims[-1]
    if tuple(tw.dims) != (d,) or tuple(to.dims) != tuple(tx.dims):
        raise L.unsupported(f"x {list(tx.dims)}, weight {list(tw.dims)}, out {list(to.dims)}: "
                            f"weight must be [{d}] and out the shape of x")
    if {L.storage(x), L.storage(w), L.storage(out)} != {"f32"}:
        raise L.unsupported("rms_norm runs on float32 tensors only")
    rows = max(1, tx.numel // max(d, 1))
    wg = workgroup_size(d)
    k = L.kernel("reduce/rms_norm", d=d, rows=rows, eps=eps, workgroup=wg, group_row=MAX_GROUPS)
    groups = (min(rows, MAX_GROUPS), -(-rows // MAX_GROUPS), 1)
    L.dispatch(k, [L.buf(x), L.buf(w), L.buf(out)], groups)


def reference(R, call) -> None:
    x, w, eps, out = _parse(R.args, call)
    xv = R.get(x).astype(np.float32)
    ms = np.mean(np.square(xv.astype(np.float64)), axis=-1, keepdims=True)
    r = (1.0 / np.sqrt(ms + np.float64(np.float32(eps)))).astype(np.float32)
    R.set(out, (xv * r) * R.get(w).astype(np.float32))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T T f T"})]
