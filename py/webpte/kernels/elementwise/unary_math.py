"""Unary math ops: abs, neg, exp, sqrt, rsqrt, sin, cos, tanh, hardswish, leaky_relu and
pow with a scalar exponent.

abs/neg of integer tensors run in exact i32, the rest in f32. Formulations, chosen because
WGSL's transcendentals are implementation-defined (lavapipe and SwiftShader both run these)
and the catalog allows about 1e-3:
- sin/cos: WGSL bounds their error (2^-11 absolute) only on [-pi, pi], so the argument is
  first reduced by whole turns k = round(x / 2pi): x - k*C1 - k*C2 with C1 = 6.28125 (8
  significant bits, so k*C1 is exact for |k| < 2^16) and C2 = 2pi - C1.
- tanh: WGSL's tanh is sinh/cosh, which overflow past |x| ~ 89; the argument is clamped to
  [-10, 10] (tanh(10) is 1.0 in f32).
- exp (3 + 2|x| ulp), sqrt and inverseSqrt (2 ulp) are accurate enough as they are.
- pow(x, e): torch's special exponents (2, 3, 0.5, -0.5, -1, -2, 1, 0) as products, sqrt,
  inverseSqrt or reciprocals, so a negative base squares as x*x; other exponents go through
  the template's `powf` (torch's zero / negative base rules around WGSL's pow).
The numpy reference evaluates the same formulas in f32.
"""

from __future__ import annotations

import math

from ...plan.storage import storage_of
from .._np import np
from ..element import Element
from ..registry import OpUnit
from .binary import NAN_INF_WORDS, pow_f32
from .unary import lower_unary, to_storage_array

_PLAIN = ("abs", "neg", "exp", "sqrt", "rsqrt", "sin", "cos", "tanh", "hardswish")
_OPS = {**{f"aten.{op}.default": op for op in _PLAIN},
        "aten.leaky_relu.default": "leaky_relu", "aten.pow.Tensor_Scalar": "pow_scalar"}

INV_2PI = 1 / (2 * math.pi)
TWO_PI_HI = 6.28125                   # exact in 8 bits: k * TWO_PI_HI is exact in f32
TWO_PI_LO = 2 * math.pi - TWO_PI_HI
# torch's pow special cases: exponent -> the template's form.
_POW_FORMS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "recip", -2.0: "recip_square"}
MAX_INT_EXPONENT = 8                  # integer pow unrolls x * x * ... in the expression


def _parse(A, call) -> tuple[str, int, int, float | None]:
    """(op, x, out, the scalar: leaky_relu's slope or pow's exponent)."""
    op = _OPS[call.name]
    if op in ("leaky_relu", "pow_scalar"):
        x, s, out = call.args
        return op, x, out, A.float(s)
    x, out = call.args
    return op, x, out, None


def _pow_params(A, call, exponent: float, ty: str) -> tuple[dict, tuple]:
    """The form of pow(x, exponent) (template params) and its runtime words."""
    if (math.isfinite(exponent) and exponent == int(exponent)
            and 0 <= exponent <= (MAX_INT_EXPONENT if ty == "i32" else 3)):
        return {"form": "product", "exponent": int(exponent)}, ()
    if ty == "i32":
        raise A.unsupported(call, f"integer pow with exponent {exponent} (only whole "
                                  f"exponents 0..{MAX_INT_EXPONENT})")
    if exponent in _POW_FORMS:
        return {"form": _POW_FORMS[exponent]}, ()
    return {"form": "general", "exponent": exponent}, NAN_INF_WORDS


def element(A, call) -> Element:
    """The op for one element: f32, or exact i32 for integer abs/neg/pow."""
    op, x, out, s = _parse(A, call)
    tx, to = A.tensor(x), A.tensor(out)
    if tx.numel != to.numel:
        raise A.unsupported(call, f"input has {tx.numel} elements, output {to.numel}")
    floats = "f32" in (storage_of(tx), storage_of(to))
    ty = "i32" if op in ("abs", "neg", "pow_scalar") and not floats else "f32"
    params: dict = {}
    runtime: tuple = ()
    if op in ("sin", "cos"):
        params = {"inv": INV_2PI, "c1": TWO_PI_HI, "c2": TWO_PI_LO}
    elif op == "leaky_relu":
        params = {"slope": s}
    elif op == "pow_scalar":
        params, runtime = _pow_params(A, call, s, ty)
    return Element(op, (x,), out, ty, params, runtime)


def lower(L, call) -> None:
    lower_unary(L, element(L.args, call))


# -- numpy reference (f32 in the kernel's order, i32 exact) ----------------------------------

def turns_reduced(x: np.ndarray) -> np.ndarray:
    """x minus its whole turns, as the kernel reduces sin/cos arguments (f32)."""
    f32 = np.float32
    k = np.round(x * f32(INV_2PI))
    return (x - k * f32(TWO_PI_HI)) - k * f32(TWO_PI_LO)


def apply(e: Element, x: np.ndarray) -> np.ndarray:
    """The element's op on an array already in its compute type."""
    f32 = np.float32
    op = e.op
    with np.errstate(all="ignore"):
        if op in ("abs", "neg", "exp", "sqrt"):
            return {"abs": np.abs, "neg": np.negative, "exp": np.exp, "sqrt": np.sqrt}[op](x)
        if op == "rsqrt":
            return f32(1) / np.sqrt(x)
        if op in ("sin", "cos"):
            return (np.sin if op == "sin" else np.cos)(turns_reduced(x))
        if op == "tanh":
            return np.tanh(np.clip(x, f32(-10), f32(10)))
        if op == "hardswish":
            return x * np.clip(x + f32(3), f32(0), f32(6)) / f32(6)
        if op == "leaky_relu":
            return np.where(x > 0, x, x * f32(e.params["slope"]))
        form = e.params["form"]
        if form == "product":   # x * x * ... left to right, as the template writes it
            k = e.params["exponent"]
            r = x if k else np.ones_like(x)
            for _ in range(k - 1):
                r = r * x
            return r
        if form == "general":
            return pow_f32(x, f32(e.params["exponent"]))
        return {"sqrt": lambda: np.sqrt(x), "rsqrt": lambda: f32(1) / np.sqrt(x),
                "recip": lambda: f32(1) / x, "recip_square": lambda: f32(1) / (x * x)}[form]()


def reference(R, call) -> None:
    e = element(R.args, call)
    to = R.args.tensor(e.out)
    v = R.get(e.inputs[0]).astype(np.float32 if e.ty == "f32" else np.int32)
    R.set(e.out, to_storage_array(apply(e, v), storage_of(to)).reshape(to.dims))


UNITS = [OpUnit(tuple(_OPS), lower, reference,
                {**{n: "T T" for n in _OPS}, "aten.leaky_relu.default": "T f T",
                 "aten.pow.Tensor_Scalar": "T f T"}, element=element)]
