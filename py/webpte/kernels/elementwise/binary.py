"""Arithmetic binary ops with broadcasting and 0-d operands: add/sub/mul, minimum/maximum,
pow (Tensor_Tensor) and division (true, trunc and floor).

Float math runs in f32, integer math in exact i32 with torch's semantics (floor division
steps down when the signs differ). `lower_broadcast` is the dispatch of every elementwise op
whose operands broadcast (compare.py, logical.py and creation.py use it too).

Where WGSL leaves a float result implementation-defined (x/0, NaN operands of min/max) the
GPU gives what the adapter gives (inf/NaN on lavapipe and SwiftShader, as torch); integer
division by zero gives WGSL's defined results (x / 0 = x, so floor(x / 0) = x too) where
torch raises.
"""

from __future__ import annotations

from .._np import np
from ..common import contiguous_strides
from ..element import Element
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of

_OPS = {"aten.add.Tensor": "add", "aten.sub.Tensor": "sub", "aten.mul.Tensor": "mul",
        "aten.minimum.default": "minimum", "aten.maximum.default": "maximum",
        "aten.pow.Tensor_Tensor": "pow", "aten.div.Tensor": "div",
        "aten.div.Tensor_mode": "div"}
_ROUNDING = {None: "div", "trunc": "div_trunc", "floor": "div_floor"}
NAN_INF_WORDS = (float("nan"), float("inf"))   # pow's runtime words (see powf in the template)


def _parse(A, call):
    op = _OPS[call.name]
    alpha = 1
    if op in ("add", "sub"):
        a, b, alpha_id, out = call.args
        alpha = A.float(alpha_id) if not A.is_null(alpha_id) else 1
    elif call.name == "aten.div.Tensor_mode":
        a, b, mode, out = call.args
        rounding = None if A.is_null(mode) else A.str(mode)
        if rounding not in _ROUNDING:
            raise A.unsupported(call, f"rounding_mode={rounding!r} (only None, 'trunc', "
                                      f"'floor')")
        op = _ROUNDING[rounding]
    else:
        a, b, out = call.args
    return op, a, b, alpha, out


def broadcast_strides(in_dims, out_dims) -> list[int]:
    """Element strides of `in_dims` broadcast to `out_dims` (0 on broadcast dims)."""
    rank = len(out_dims)
    padded = (1,) * (rank - len(in_dims)) + tuple(in_dims)
    strides = contiguous_strides(padded)
    return [0 if padded[d] == 1 and out_dims[d] != 1 else strides[d] for d in range(rank)]


def collapse_dims(dims, strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """`dims` and each operand's `strides` with size-1 dims dropped and neighbouring dims
    merged where every operand walks them as one (outer stride = inner stride * inner size,
    broadcast ones included): the same element order with fewer divisions per element (a
    [1, 12, 1024, 1024] * [1, 1, 1, 1] product indexes x by the flat index, y by 0)."""
    keep = [d for d in range(len(dims)) if dims[d] != 1] or [len(dims) - 1]
    out_dims: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in keep:
        if out_dims and all(s[-1] == st[d] * dims[d] for s, st in zip(out_strides, strides)):
            out_dims[-1] *= dims[d]
            for s, st in zip(out_strides, strides):
                s[-1] = st[d]
        else:
            out_dims.append(dims[d])
            for s, st in zip(out_strides, strides):
                s.append(st[d])
    return out_dims, out_strides


def check_broadcast(A, call, vids, out) -> None:
    """Raise UnsupportedOpError unless every tensor of `vids` broadcasts to `out`."""
    dims = tuple(A.tensor(out).dims) or (1,)
    for t in (A.tensor(v) for v in vids):
        if len(t.dims) > len(dims) or any(
                x not in (1, y) for x, y in zip(reversed(t.dims), reversed(dims))):
            raise A.unsupported(call, f"cannot broadcast {list(t.dims)} to "
                                      f"{list(A.tensor(out).dims)}")


def element(A, call) -> Element:
    """The op for one element in f32 or i32: `x + alpha * y`, `min(x, y)`, `floor(x / y)`..."""
    op, a, b, alpha, out = _parse(A, call)
    check_broadcast(A, call, (a, b), out)
    ty = "f32" if storage_of(A.tensor(out)) == "f32" else "i32"
    if ty == "i32" and op in ("pow", "div"):
        raise A.unsupported(call, f"{call.name} with an integer output (only float32)")
    if ty == "i32" and alpha != int(alpha):
        raise A.unsupported(call, f"integer {op} with non-integer alpha {alpha}")
    if op in ("add", "sub", "mul"):
        return Element(op, (a, b), out, ty,
                       {"alpha": float(alpha) if ty == "f32" else int(alpha)})
    return Element(op, (a, b), out, ty, runtime=NAN_INF_WORDS if op == "pow" else ())


def lower_broadcast(L, e: Element) -> None:
    """One dispatch of `shaders/elementwise/broadcast.wgsl.j2` computing `e` for every output
    element, its operands (0 to 3) broadcast to the output; runtime words in binding `p`."""
    to = L.tensor(e.out)
    dims = tuple(to.dims) or (1,)
    out_kind = L.storage(e.out)
    n = max(1, to.numel)
    walk, strides = collapse_dims(dims, [broadcast_strides(L.tensor(v).dims, dims)
                                         for v in e.inputs])
    operands = [{"name": name, "kind": L.storage(v), "reg": reg, "strides": st}
                for v, name, reg, st in zip(e.inputs, "abc", "xyz", strides)]
    bindings = [(x["name"], WGSL_TYPE[x["kind"]], "read") for x in operands]
    bindings += [("p", "u32", "read")] if e.runtime else []
    wg, row = L.grid(-(-n // 4) if out_kind in PACKED else n)
    k = L.kernel("elementwise/broadcast", op=e.op, n=n, shape=dims, rank=len(walk), dims=walk,
                 operands=operands, bindings=bindings + [("out", WGSL_TYPE[out_kind],
                                                          "read_write")],
                 out_kind=out_kind, out_packed=out_kind in PACKED, ty=e.ty,
                 element=e.spec(), workgroup=256, row=row)
    bufs = [L.buf(v) for v in e.inputs] + ([L.params(*e.runtime)] if e.runtime else [])
    L.dispatch(k, bufs + [L.buf(e.out)], wg)


def lower(L, call) -> None:
    lower_broadcast(L, element(L.args, call))


# -- numpy reference (f32 in the kernel's order, i32 exact) ----------------------------------

def pow_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The kernel's `powf` (torch's pow special cases around WGSL's pow) in f32 numpy."""
    f32 = np.float32
    x, y = np.asarray(x, f32), np.asarray(y, f32)
    with np.errstate(all="ignore"):
        m = np.power(np.abs(x), y)
        odd = y - f32(2) * np.floor(f32(0.5) * y) == 1
        r = np.where((x < 0) & odd, -m, m)
        r = np.where((x < 0) & (np.floor(y) != y), f32(np.nan), r)
        r = np.where(x == 0, np.where(y > 0, f32(0), f32(np.inf)), r)
        return np.where(y == 0, f32(1), r).astype(f32)


def int_div(x: np.ndarray, y: np.ndarray, floor: bool) -> np.ndarray:
    """WGSL's i32 `/` and `%` (truncating; x / 0 = x, x % 0 = 0) and the kernel's floor step."""
    x, y = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(y, np.int64))
    safe = np.where(y == 0, 1, y)
    q = np.where(y == 0, x, np.trunc(x / safe).astype(np.int64))
    overflow = (x == -2 ** 31) & (y == -1)
    q = np.where(overflow, x, q)           # WGSL: x / 0 and the overflow give x, x % them 0
    if floor:
        rem = np.where((y == 0) | overflow, 0, x - q * y)
        q = q - ((rem != 0) & ((x ^ y) < 0))
    return q.astype(np.int32)


def apply(op: str, x: np.ndarray, y: np.ndarray, alpha=1) -> np.ndarray:
    """One binary op on arrays already in the compute type (f32 or i32)."""
    ty = x.dtype.type
    with np.errstate(all="ignore"):
        if op == "add":
            return x + ty(alpha) * y if alpha != 1 else x + y
        if op == "sub":
            return x - ty(alpha) * y if alpha != 1 else x - y
        if op == "mul":
            return x * y
        if op in ("minimum", "maximum"):
            return np.minimum(x, y) if op == "minimum" else np.maximum(x, y)
        if op == "pow":
            return pow_f32(x, y)
        if ty is np.int32:
            return int_div(x, y, floor=op == "div_floor")
        q = x / y
        return {"div": q, "div_trunc": np.trunc(q), "div_floor": np.floor(q)}[op]


def reference(R, call) -> None:
    op, a, b, alpha, out = _parse(R.args, call)
    to = R.args.tensor(out)
    ty = np.float32 if storage_of(to) == "f32" else np.int32
    r = apply(op, R.get(a).astype(ty), R.get(b).astype(ty), alpha)
    R.set(out, np.broadcast_to(r, to.dims).astype(ty))


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {"aten.add.Tensor": "T T f? T", "aten.sub.Tensor": "T T f? T",
                 "aten.mul.Tensor": "T T T", "aten.minimum.default": "T T T",
                 "aten.maximum.default": "T T T", "aten.pow.Tensor_Tensor": "T T Tf",
                 "aten.div.Tensor": "T T Tf", "aten.div.Tensor_mode": "T T s? T"},
                element=element)]
