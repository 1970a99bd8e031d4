"""aten.add.Tensor / aten.sub.Tensor / aten.mul.Tensor with broadcasting and 0-d operands."""

from __future__ import annotations

from ..plan.storage import PACKED, WGSL_TYPE
from ._np import np
from .common import contiguous_strides
from .registry import OpUnit

_OPS = {"aten.add.Tensor": "add", "aten.sub.Tensor": "sub", "aten.mul.Tensor": "mul"}


def _parse(A, call):
    op = _OPS[call.name]
    if op == "mul":
        a, b, out = call.args
        alpha = 1
    else:
        a, b, alpha_id, out = call.args
        alpha = A.float(alpha_id) if A.graph.values[alpha_id] is not None else 1
    return op, a, b, alpha, out


def broadcast_strides(in_dims, out_dims) -> list[int]:
    """Element strides of `in_dims` broadcast to `out_dims` (0 on broadcast dims)."""
    rank = len(out_dims)
    padded = (1,) * (rank - len(in_dims)) + tuple(in_dims)
    strides = contiguous_strides(padded)
    return [0 if padded[d] == 1 and out_dims[d] != 1 else strides[d] for d in range(rank)]


def lower(L, call):
    op, a, b, alpha, out = _parse(L.args, call)
    ta, tb, to = L.tensor(a), L.tensor(b), L.tensor(out)
    dims = tuple(to.dims) or (1,)
    for t in (ta, tb):
        if len(t.dims) > len(dims) or any(
                x not in (1, y) for x, y in zip(reversed(t.dims), reversed(dims))):
            raise L.unsupported(f"cannot broadcast {list(t.dims)} to {list(to.dims)}")
    out_kind = L.storage(out)
    ty = "f32" if out_kind == "f32" else "i32"
    if ty == "i32" and alpha != int(alpha):
        raise L.unsupported(f"integer {op} with non-integer alpha {alpha}")
    alpha_lit = f"{float(alpha)!r}" if ty == "f32" else f"{int(alpha)}"
    if ty == "f32" and alpha == 1:
        alpha_lit = "1.0"
    n = max(1, to.numel)
    per = 4 if out_kind in PACKED else 1
    wg, row = L.grid(-(-n // per))
    k = L.kernel("binary", op=op, n=n, rank=len(dims), dims=dims,
                 a_strides=broadcast_strides(ta.dims, dims),
                 b_strides=broadcast_strides(tb.dims, dims),
                 a_kind=L.storage(a), b_kind=L.storage(b), out_kind=out_kind,
                 a_wgsl=WGSL_TYPE[L.storage(a)], b_wgsl=WGSL_TYPE[L.storage(b)],
                 out_wgsl=WGSL_TYPE[out_kind], out_packed=out_kind in PACKED,
                 ty=ty, alpha=alpha_lit, workgroup=256, row=row)
    L.dispatch(k, [L.buf(a), L.buf(b), L.buf(out)], wg)


def reference(R, call):
    op, a, b, alpha, out = _parse(R.args, call)
    to = R.args.tensor(out)
    ty = np.float32 if to.dtype.name == "FLOAT32" else np.int32
    x = R.get(a).astype(ty)
    y = R.get(b).astype(ty)
    with np.errstate(over="ignore"):
        if op == "add":
            r = x + ty(alpha) * y if alpha != 1 else x + y
        elif op == "sub":
            r = x - ty(alpha) * y if alpha != 1 else x - y
        else:
            r = x * y
    R.set(out, np.broadcast_to(r, to.dims) if r.shape != tuple(to.dims) else r)


UNITS = [OpUnit(tuple(_OPS), lower, reference)]
