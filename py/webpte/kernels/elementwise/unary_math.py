"""Unary math ops: abs, neg, exp, sqrt, rsqrt, sin, cos, tanh, hardswish, leaky_relu and
pow with a scalar exponent.

abs/neg of integer tensors run in exact i32, the rest in f32. Formulations, chosen because
WGSL's transcendentals are implementation-defined (lavapipe and SwiftShader both run these)
and the catalog allows about 1e-3:
- sin/cos: WGSL bounds their error only to 2^-11 absolute on [-pi, pi], and SwiftShader is
  that coarse (rotary tables computed in-graph drifted by 1e-4 relative), so they are
  webpte's own: whole turns off, k = round(x / 2pi): x - k*C1 - k*C2 with C1 = 6.28125 (8
  significant bits, so k*C1 is exact for |k| < 2^16) and C2 = 2pi - C1; then quarter turns
  (pi/2 in three parts, Cody-Waite) and Cephes' f32 minimax polynomials of sin and cos on
  [-pi/4, pi/4], picked by the quadrant (about 1 ulp).
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

from .._np import np
from ..element import Element
from ..registry import OpUnit
from ..storage import storage_of
from .binary import NAN_INF_WORDS, pow_f32
from .unary import lower_unary, to_storage_array

_PLAIN = ("abs", "neg", "exp", "sqrt", "rsqrt", "sin", "cos", "tanh", "hardswish")
_OPS = {**{f"aten.{op}.default": op for op in _PLAIN},
        "aten.leaky_relu.default": "leaky_relu", "aten.pow.Tensor_Scalar": "pow_scalar"}

INV_2PI = 1 / (2 * math.pi)
TWO_PI_HI = 6.28125                   # exact in 8 bits: k * TWO_PI_HI is exact in f32
TWO_PI_LO = 2 * math.pi - TWO_PI_HI
INV_PIO2 = 2 / math.pi
PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)   # pi/2, Cody-Waite
SIN_POLY = (-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4)      # Cephes sinf
COS_POLY = (4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5)  # Cephes cosf
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
        params = {"inv": INV_2PI, "c1": TWO_PI_HI, "c2": TWO_PI_LO, "inv_pio2": INV_PIO2,
                  "pio2": PIO2, "sin": SIN_POLY, "cos": COS_POLY}
    elif op == "leaky_relu":
        params = {"slope": s}
    elif op == "pow_scalar":
        params, runtime = _pow_params(A, call, s, ty)
    # sin/cos call a helper function of their own kernel's template: not fused.
    return Element(op, (x,), out, ty, params, runtime, fusible=op not in ("sin", "cos"))


def lower(L, call) -> None:
    lower_unary(L, element(L.args, call))


# -- numpy reference (f32 in the kernel's order, i32 exact) ----------------------------------

def turns_reduced(x: np.ndarray) -> np.ndarray:
    """x minus its whole turns, as the kernel reduces sin/cos arguments (f32)."""
    f32 = np.float32
    k = np.round(x * f32(INV_2PI))
    return (x - k * f32(TWO_PI_HI)) - k * f32(TWO_PI_LO)


def sincos_f32(x: np.ndarray, cos: bool) -> np.ndarray:
    """The kernel's sin (or cos) in f32, step by step as `sincos_f32` in the template."""
    f32 = np.float32
    r = turns_reduced(x)
    q = np.round(r * f32(INV_PIO2))
    y = ((r - q * f32(PIO2[0])) - q * f32(PIO2[1])) - q * f32(PIO2[2])
    z = y * y
    s1, s2, s3 = (f32(c) for c in SIN_POLY)
    c1, c2, c3 = (f32(c) for c in COS_POLY)
    s = y + y * z * (s1 + z * (s2 + z * s3))
    co = (f32(1) - f32(0.5) * z) + z * z * (c1 + z * (c2 + z * c3))
    quadrant = (np.nan_to_num(q).astype(np.int64) + 4 + int(cos)) & 3
    v = np.where(quadrant & 1 == 1, co, s)
    return np.where(quadrant >= 2, -v, v).astype(np.float32)


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
            return sincos_f32(x, op == "cos")
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
