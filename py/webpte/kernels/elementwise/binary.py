"""aten.add.Tensor / aten.sub.Tensor / aten.mul.Tensor with broadcasting and 0-d operands."""

from __future__ import annotations

from ...plan.storage import PACKED, WGSL_TYPE, storage_of
from .._np import np
from ..common import contiguous_strides
from ..element import Element
from ..registry import OpUnit

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


def _check_broadcast(A, call, vids, out) -> None:
    dims = tuple(A.tensor(out).dims) or (1,)
    for t in (A.tensor(v) for v in vids):
        if len(t.dims) > len(dims) or any(
                x not in (1, y) for x, y in zip(reversed(t.dims), reversed(dims))):
            raise A.unsupported(call, f"cannot broadcast {list(t.dims)} to "
                                      f"{list(A.tensor(out).dims)}")


def element(A, call) -> Element:
    """The op for one element: `x + alpha * y`, `x - alpha * y` or `x * y` in f32 or i32."""
    op, a, b, alpha, out = _parse(A, call)
    _check_broadcast(A, call, (a, b), out)
    ty = "f32" if storage_of(A.tensor(out)) == "f32" else "i32"
    if ty == "i32" and alpha != int(alpha):
        raise A.unsupported(call, f"integer {op} with non-integer alpha {alpha}")
    return Element(op, (a, b), out, ty, {"alpha": float(alpha) if ty == "f32" else int(alpha)})


def lower(L, call):
    e = element(L.args, call)
    a, b = e.inputs
    ta, tb, to = L.tensor(a), L.tensor(b), L.tensor(e.out)
    dims = tuple(to.dims) or (1,)
    out_kind = L.storage(e.out)
    n = max(1, to.numel)
    per = 4 if out_kind in PACKED else 1
    wg, row = L.grid(-(-n // per))
    k = L.kernel("elementwise/binary", op=e.op, n=n, rank=len(dims), dims=dims,
                 a_strides=broadcast_strides(ta.dims, dims),
                 b_strides=broadcast_strides(tb.dims, dims),
                 a_kind=L.storage(a), b_kind=L.storage(b), out_kind=out_kind,
                 a_wgsl=WGSL_TYPE[L.storage(a)], b_wgsl=WGSL_TYPE[L.storage(b)],
                 out_wgsl=WGSL_TYPE[out_kind], out_packed=out_kind in PACKED,
                 ty=e.ty, element=e.spec(), workgroup=256, row=row)
    L.dispatch(k, [L.buf(a), L.buf(b), L.buf(e.out)], wg)


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


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {"aten.add.Tensor": "T T f? T", "aten.sub.Tensor": "T T f? T",
                 "aten.mul.Tensor": "T T T"}, element=element)]
