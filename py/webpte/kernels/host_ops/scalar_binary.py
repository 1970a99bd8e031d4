"""Tensor-scalar arithmetic of portable kernel calls: add.Scalar (`x + alpha * s`, RMSNorm's
eps add), mul.Scalar and remainder.Scalar (the ring-cache index), in f32 or exact i32.

Like torch, a float tensor meets the scalars cast to f32; an integer tensor meets integer
scalars exactly (a float scalar with an integer tensor is refused). remainder takes the
divisor's sign (Python's modulo): `x - floor(x / s) * s` in f32, the adjusted `%` in i32.
The scalars are runtime words, so every eps add of a model is one pipeline.
"""

from __future__ import annotations

from .._np import np
from ..elementwise.unary import to_f32, to_storage_array
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of

_OPS = {"aten.add.Scalar": "add", "aten.mul.Scalar": "mul", "aten.remainder.Scalar": "remainder"}
_SCHEMA = {"aten.add.Scalar": "T f f? T", "aten.mul.Scalar": "T f T",
           "aten.remainder.Scalar": "T f T"}


def _parse(A, call) -> tuple[str, int, int, str, float | int, float | int]:
    op = _OPS[call.name]
    x, s, *rest = call.args
    out = rest[-1]
    alpha = A.float(rest[0]) if op == "add" and not A.is_null(rest[0]) else 1.0
    tx, to = A.tensor(x), A.tensor(out)
    if tx.dims != to.dims:
        raise A.unsupported(call, f"input dims {list(tx.dims)}, output {list(to.dims)}")
    kinds = (storage_of(tx), storage_of(to))
    if any(k in PACKED or k == "bool" for k in kinds):
        raise A.unsupported(call, f"{call.name} on {tx.dtype.numpy_name} -> "
                            f"{to.dtype.numpy_name} (float32 and int32/int64 only)")
    ty = "f32" if "f32" in kinds else "i32"
    scalar = A.float(s)
    if ty == "f32":
        return op, x, out, ty, to_f32(scalar), to_f32(alpha)
    if scalar != int(scalar) or alpha != int(alpha) or not -2 ** 31 <= scalar < 2 ** 31:
        raise A.unsupported(call, f"integer {op} with scalar {scalar} (alpha {alpha})")
    if op == "remainder" and scalar == 0:
        raise A.unsupported(call, "integer remainder by zero")
    return op, x, out, ty, int(scalar), int(alpha)


def lower(L, call) -> None:
    op, x, out, ty, s, alpha = _parse(L.args, call)
    n = max(1, L.tensor(out).numel)
    wg, row = L.grid(n)
    k = L.kernel("host_ops/scalar_binary", op=op, n=n, ty=ty, in_kind=L.storage(x),
                 out_kind=L.storage(out), in_wgsl=L.wgsl_type(x), out_wgsl=WGSL_TYPE[
                     L.storage(out)], workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.params(s, alpha), L.buf(out)], wg)


def reference(R, call) -> None:
    op, x, out, ty, s, alpha = _parse(R.args, call)
    dt = np.float32 if ty == "f32" else np.int32
    v = R.get(x).astype(dt)
    s, alpha = dt(s), dt(alpha)
    with np.errstate(all="ignore"):
        if op == "add":
            r = v + alpha * s
        elif op == "mul":
            r = v * s
        elif ty == "f32":
            r = v - np.floor(v / s) * s
        else:
            r = np.remainder(v, s)   # numpy's int remainder takes the divisor's sign too
    to = R.args.tensor(out)
    R.set(out, to_storage_array(np.asarray(r, dt), storage_of(to)))


UNITS = [OpUnit(tuple(_OPS), lower, reference, _SCHEMA)]
