"""Elementwise unary ops: round, clamp (and hardtanh), relu, sigmoid, gelu (tanh and erf).

Float math runs in f32; round/clamp/relu of integer tensors run in exact i32.
Inputs and outputs may be any storage kind; packed int8/uint8 outputs are written
four per invocation (one u32 word each), like binary.py. `lower_unary` is the dispatch of
every one-operand elementwise op (unary_math.py, compare.py and logical.py use it too).
"""

from __future__ import annotations

import math
import struct

from ...errors import UnsupportedOpError
from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import PACKED, WGSL_TYPE, storage_of

_OPS = {"aten.round.default": "round", "aten.clamp.default": "clamp",
        "aten.relu.default": "relu", "aten.sigmoid.default": "sigmoid",
        "aten.gelu.default": "gelu", "aten.hardtanh.default": "clamp"}

# torch's constants for the tanh form of GELU: sqrt(2/pi) and 0.044715.
GELU_BETA = 0.7978845608028654
GELU_KAPPA = 0.044715
SQRT1_2 = 0.7071067811865476

# erf(x) in f32 as three weighted-minimax polynomial pieces, fitted offline against
# scipy.special.erf (highest degree first). Evaluated in f32 without fma the max abs
# error over all f32 inputs is 7.6e-8 (1.3 ulp); the tests check it against math.erf.
#   |x| < 1:  erf = |x| + |x| * ERF_SMALL(x^2)
#   |x| < 2:  erf = ERF_MID(|x| - 1.5)
#   else:     erf = 1 - exp(ERF_LARGE(min(|x|, 3.95) - 3))   (a fit of log(erfc))
ERF_SMALL = (7.6470555e-05, -0.00079423375, 0.0051797475, -0.02684859, 0.112834305,
             -0.37612605, 0.12837915)
ERF_MID = (-0.0024043536, -0.0038355815, 0.019334655, -0.015032912, -0.04459964,
           0.13876344, -0.1783954, 0.11893008, 0.96610516)
ERF_LARGE = (7.628548e-05, -0.00020182738, 0.001373613, -0.007413925, -0.9573985,
             -6.303755, -10.720363)
ERF_LARGE_CUTOFF = 3.95  # erf rounds to 1.0 in f32 from here on


def _parse(A, call) -> tuple[str, int, int, dict]:
    """(op, x, out, params) where params holds clamp bounds or the gelu form."""
    op = _OPS[call.name]
    params: dict = {}
    if op == "clamp":   # hardtanh is clamp with both bounds
        x, lo, hi, out = call.args
        params = {"lo": A.optional_float(lo), "hi": A.optional_float(hi)}
        if params["lo"] is None and params["hi"] is None:
            raise A.unsupported(call, "clamp needs at least one of min and max")
    elif op == "gelu":
        x, form, out = call.args
        approximate = A.str(form)
        if approximate not in ("tanh", "none"):
            raise A.unsupported(call, f"gelu approximate={approximate!r} is not supported "
                                      f"(only 'tanh' and 'none')")
        op = f"gelu_{'tanh' if approximate == 'tanh' else 'erf'}"
    else:
        x, out = call.args
    return op, x, out, params


def compute_type(op: str, in_kind: str, out_kind: str) -> str:
    """f32 for transcendental ops or any float side; exact i32 for integer round/clamp/relu."""
    if op in ("sigmoid", "gelu_tanh", "gelu_erf") or "f32" in (in_kind, out_kind):
        return "f32"
    return "i32"


def to_f32(v: float) -> float:
    """Round a Python float to f32 (overflow gives a signed infinity), without numpy."""
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _bounds(params: dict, ty: str, where: str, name: str) -> tuple:
    """Clamp bounds as the kernel uses them: f32 values, or ints saturated to i32.

    A bound that is infinite in f32 and on its no-op side is dropped."""
    out = []
    for key, sign in (("lo", -1), ("hi", 1)):
        v = params.get(key)
        if v is not None and ty == "f32":
            v = to_f32(v)
            if math.isinf(v):
                if (v > 0) != (sign > 0):
                    raise UnsupportedOpError(f"{where}: clamp bound {key}={v} leaves no "
                                             f"finite result", [name])
                v = None
        elif v is not None:
            if v != int(v):
                raise UnsupportedOpError(f"{where}: integer clamp with non-integer bound "
                                         f"{v}", [name])
            v = min(max(int(v), -2 ** 31), 2 ** 31 - 1)
        out.append(v)
    return tuple(out)


def element(A, call) -> Element:
    """The op for one element, in its compute type (f32, or exact i32)."""
    op, x, out, params = _parse(A, call)
    tx, to = A.tensor(x), A.tensor(out)
    if tx.numel != to.numel:
        raise A.unsupported(call, f"input has {tx.numel} elements, output {to.numel}")
    ty = compute_type(op, storage_of(tx), storage_of(to))
    lo, hi = _bounds(params, ty, A.op_name, call.name)
    consts = {"clamp": {"lo": lo, "hi": hi},
              "gelu_tanh": {"beta": GELU_BETA, "kappa": GELU_KAPPA},
              "gelu_erf": {"sqrt1_2": SQRT1_2}}.get(op, {})
    return Element(op, (x,), out, ty, consts, fusible=op != "gelu_erf")


def lower_unary(L, e: Element) -> None:
    """One dispatch of `shaders/elementwise/unary.wgsl.j2` computing `e` (one operand with the
    output's element count) for every element; runtime words in binding `p`."""
    (x,) = e.inputs
    in_kind, out_kind = L.storage(x), L.storage(e.out)
    n = max(1, L.tensor(e.out).numel)
    packed = out_kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    k = L.kernel("elementwise/unary", op=e.op, n=n, ty=e.ty, in_kind=in_kind, out_kind=out_kind,
                 in_wgsl=WGSL_TYPE[in_kind], out_wgsl=WGSL_TYPE[out_kind], out_packed=packed,
                 element=e.spec(), reads_params=bool(e.runtime), erf_small=ERF_SMALL,
                 erf_mid=ERF_MID, erf_large=ERF_LARGE, erf_cutoff=ERF_LARGE_CUTOFF,
                 workgroup=256, row=row)
    bufs = [L.buf(x)] + ([L.params(*e.runtime)] if e.runtime else [])
    L.dispatch(k, bufs + [L.buf(e.out)], wg)


def lower(L, call) -> None:
    lower_unary(L, element(L.args, call))


# -- numpy reference (float32 arithmetic in the kernel's order, i32 exact) -------------------

def _horner(coefs, t: np.ndarray) -> np.ndarray:
    p = np.full_like(t, np.float32(coefs[0]))
    for c in coefs[1:]:
        p = p * t + np.float32(c)
    return p


def erf_f32(v: np.ndarray) -> np.ndarray:
    """The kernel's erf, evaluated with float32 numpy (no fma)."""
    v = np.asarray(v, np.float32)
    a = np.abs(v)
    with np.errstate(over="ignore", invalid="ignore"):
        small = a * _horner(ERF_SMALL, a * a) + a
        mid = _horner(ERF_MID, a - np.float32(1.5))
        tail = np.minimum(a, np.float32(ERF_LARGE_CUTOFF)) - np.float32(3.0)
        large = np.float32(1.0) - np.exp(_horner(ERF_LARGE, tail))
    r = np.where(a < 1, small, np.where(a < 2, mid, large))
    return np.where(v < 0, -r, r).astype(np.float32)


def to_storage_array(v: np.ndarray, kind: str) -> np.ndarray:
    """Computed values (float32 or int32) -> a storage kind, as the kernels convert.

    Floats truncate toward zero and saturate like WGSL's i32(f32) (to [-2^31, 2^31-128],
    the f32 range of i32; NaN is implementation-defined there, 0 here), then int8/uint8
    keep the low byte as torch does; bool is v != 0.
    """
    if kind == "bool":
        return v != 0
    if kind == "f32":
        return v.astype(np.float32)
    if v.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            t = np.clip(np.trunc(v.astype(np.float64)), -2.0 ** 31, 2.0 ** 31 - 128)
        v = np.nan_to_num(t, nan=0.0).astype(np.int32)
    v = v.astype(np.int32)
    return v.astype({"i32": np.int32, "i8": np.int8, "u8": np.uint8}[kind])


def _apply(op: str, x: np.ndarray, lo, hi) -> np.ndarray:
    f32 = np.float32
    with np.errstate(over="ignore"):
        if op == "round":
            return np.round(x) if x.dtype == np.float32 else x
        if op == "relu":
            return np.maximum(x, x.dtype.type(0))
        if op == "clamp":
            if lo is not None:
                x = np.maximum(x, x.dtype.type(lo))
            return x if hi is None else np.minimum(x, x.dtype.type(hi))
        if op == "sigmoid":
            return f32(1) / (f32(1) + np.exp(-x))
        if op == "gelu_tanh":
            inner = f32(GELU_BETA) * (x + f32(GELU_KAPPA) * (x * x * x))
            return f32(0.5) * x * (f32(1) + np.tanh(np.clip(inner, f32(-10), f32(10))))
        return f32(0.5) * x * (f32(1) + erf_f32(x * f32(SQRT1_2)))


def reference(R, call) -> None:
    op, x, out, params = _parse(R.args, call)
    to = R.args.tensor(out)
    out_kind = storage_of(to)
    ty = compute_type(op, storage_of(R.args.tensor(x)), out_kind)
    lo, hi = _bounds(params, ty, R.args.op_name, call.name)
    v = R.get(x).astype(np.float32 if ty == "f32" else np.int32)
    R.set(out, to_storage_array(_apply(op, v, lo, hi), out_kind).reshape(to.dims))


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {**{n: "T T" for n in _OPS}, "aten.clamp.default": "T f? f? T",
                 "aten.hardtanh.default": "T f f T", "aten.gelu.default": "T s T"},
                element=element)]
