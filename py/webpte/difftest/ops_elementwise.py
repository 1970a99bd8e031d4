"""Op generators: elementwise unary and binary ops (broadcasting), comparisons, logical and
bitwise ops, where, casts and integer arithmetic. Each returns False when the pool offers
no operands that fit (the generator then tries another op)."""

from __future__ import annotations

from .builder import (
    BOOL,
    BOUND,
    FLOAT,
    INT32,
    INT64,
    INTS,
    MAX_NUMEL,
    TORCH_DTYPE,
    Builder,
    Val,
    broadcast,
)

# name: (expression, exact kept, distinct kept, bound(b), operand limit)
UNARY = {
    "abs": ("torch.abs({a})", True, True, lambda b: b, BOUND),
    "neg": ("-{a}", True, True, lambda b: b, BOUND),
    "relu": ("torch.relu({a})", True, False, lambda b: b, BOUND),
    "sigmoid": ("torch.sigmoid({a})", False, False, lambda b: 1.0, BOUND),
    "tanh": ("torch.tanh({a})", False, False, lambda b: 1.0, BOUND),
    "gelu": ("F.gelu({a})", False, False, lambda b: b, BOUND),
    "gelu_tanh": ('F.gelu({a}, approximate="tanh")', False, False, lambda b: b, BOUND),
    "hardswish": ("F.hardswish({a})", False, False, lambda b: b, BOUND),
    "hardtanh": ("F.hardtanh({a}, -0.75, 1.5)", True, False, lambda b: min(b, 1.5), BOUND),
    "leaky_relu": ("F.leaky_relu({a}, 0.125)", True, True, lambda b: b, BOUND),
    "sin": ("torch.sin({a})", False, False, lambda b: 1.0, 8.0),
    "cos": ("torch.cos({a})", False, False, lambda b: 1.0, 8.0),
    "exp": ("torch.exp({a})", False, False, lambda b: 2.72 ** b, 4.0),
    "sqrt": ("torch.sqrt({a}.abs() + 0.5)", False, False, lambda b: (b + 0.5) ** 0.5, BOUND),
    "rsqrt": ("torch.rsqrt({a}.abs() + 0.5)", False, False, lambda b: 1.5, BOUND),
    "square": ("torch.pow({a}, 2)", False, False, lambda b: b * b, 8.0),
    "cube": ("{a} ** 3", False, False, lambda b: b ** 3, 4.0),
    "round": ("torch.round({a})", True, False, lambda b: b + 1, BOUND),
    "clamp": ("torch.clamp({a}, min=-1.25, max=0.75)", True, False, lambda b: 1.25, BOUND),
    "mul_scalar": ("{a} * -1.5", True, True, lambda b: 1.5 * b, BOUND),
    "add_scalar": ("{a} + 0.625", True, True, lambda b: b + 0.625, BOUND),
}
# name: (expression, exact when both are, bound(ba, bb), operand limit)
BINARY = {
    "add": ("{a} + {b}", True, lambda x, y: x + y, BOUND),
    "sub": ("torch.sub({a}, {b})", True, lambda x, y: x + y, BOUND),
    "mul": ("{a} * {b}", True, lambda x, y: x * y, 8.0),
    "add_alpha": ("torch.add({a}, {b}, alpha=0.5)", False, lambda x, y: x + y, BOUND),
    "div": ("{a} / ({b}.abs() + 0.5)", False, lambda x, y: 2 * x, BOUND),
    "maximum": ("torch.maximum({a}, {b})", True, lambda x, y: max(x, y), BOUND),
    "minimum": ("torch.minimum({a}, {b})", True, lambda x, y: max(x, y), BOUND),
    "pow": ("torch.pow({a}.abs() + 0.5, torch.clamp({b}, -2.0, 2.0))", False,
            lambda x, y: max((x + 0.5) ** 2, 4.0), 8.0),
}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def partner_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: the same, leading dims dropped, dims set to 1,
    size-1 dims widened, or 0-d."""
    r = b.rng.random()
    if r < 0.35:
        return shape
    if r < 0.45:
        return ()
    s = list(shape[b.rng.randint(0, len(shape)):] if b.chance(0.4) else shape)
    for i in range(len(s)):
        if s[i] == 1 and b.chance(0.3):
            s[i] = b.dim()
        elif b.chance(0.35):
            s[i] = 1
    return tuple(s)


def partner(b: Builder, a: Val, dtypes=(FLOAT,), pred=lambda v: True) -> Val:
    """A second operand that broadcasts with `a`: from the pool or a new input."""
    def fits(v):
        out = broadcast(v.shape, a.shape)
        return (v is not a and v.dtype in dtypes and out is not None
                and _numel(out) <= MAX_NUMEL and pred(v))
    v = b.pick(fits) if b.chance(0.55) else None
    if v is None:
        dtype = dtypes[0]
        shape = partner_shape(b, a.shape)
        if _numel(broadcast(shape, a.shape)) > MAX_NUMEL:
            shape = a.shape
        v = (b.input(shape, dtype) if dtype in (FLOAT, BOOL)
             else b.input(shape, dtype, lo=-20, hi=20))
    return v


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _distinct(out_shape, *vals: Val) -> bool:
    """An injective op keeps distinct when a distinct operand spans the whole output."""
    return any(v.distinct and v.shape == tuple(out_shape) for v in vals)


def unary(b: Builder) -> bool:
    name = b.rng.choice(list(UNARY))
    expr, exact, distinct, bound, limit = UNARY[name]
    a = b.float_operand(limit=limit)
    if name == "round" and not a.exact:
        return False
    b.emit(expr.format(a=a.name), a.shape, FLOAT, (a,), exact=exact and a.exact,
           distinct=distinct and a.distinct, bound=bound(a.bound))
    return True


def binary(b: Builder) -> bool:
    name = b.rng.choice(list(BINARY))
    expr, exact, bound, limit = BINARY[name]
    a = b.float_operand(limit=limit)
    c = b.tame(partner(b, a), limit)
    if b.chance(0.3):
        a, c = c, a
    out = broadcast(a.shape, c.shape)
    injective = name in ("add", "sub", "mul", "add_alpha")
    b.emit(expr.format(a=a.name, b=c.name), out, FLOAT, (a, c),
           exact=exact and a.exact and c.exact,
           distinct=injective and _distinct(out, a, c), bound=bound(a.bound, c.bound))
    return True


def compare(b: Builder) -> bool:
    name = b.rng.choice(list(COMPARE))
    a = b.pick(lambda v: v.exact and v.dtype in (FLOAT, *INTS))
    if a is None:
        a = b.input(b.shape(b.rng.randint(1, 3)))
    if b.chance(0.35):
        other = "0.25" if a.dtype == FLOAT else "3"
        b.emit(f"{a.name} {COMPARE[name]} {other}", a.shape, BOOL, (a,), distinct=False,
               bound=1, hi=1)
        return True
    c = partner(b, a, (a.dtype,), lambda v: v.exact)
    out = broadcast(a.shape, c.shape)
    b.emit(f"torch.{name}({a.name}, {c.name})", out, BOOL, (a, c), distinct=False, bound=1,
           hi=1)
    return True


def logical(b: Builder) -> bool:
    a = b.pick(lambda v: v.dtype == BOOL)
    if a is None:
        return False
    name = b.rng.choice(("logical_and", "logical_or", "logical_xor", "logical_not", "and",
                         "or", "xor", "invert"))
    if name in ("logical_not", "invert"):
        expr = f"torch.logical_not({a.name})" if name == "logical_not" else f"~{a.name}"
        b.emit(expr, a.shape, BOOL, (a,), distinct=False, bound=1, hi=1)
        return True
    c = partner(b, a, (BOOL,))
    out = broadcast(a.shape, c.shape)
    op = {"and": "&", "or": "|", "xor": "^"}.get(name)
    expr = f"{a.name} {op} {c.name}" if op else f"torch.{name}({a.name}, {c.name})"
    b.emit(expr, out, BOOL, (a, c), distinct=False, bound=1, hi=1)
    return True


def where(b: Builder) -> bool:
    cond = b.pick(lambda v: v.dtype == BOOL)
    if cond is None:
        cond = b.input(b.shape(b.rng.randint(1, 3)), BOOL)
    dtype = FLOAT if b.chance(0.8) else INT64
    x = partner(b, cond, (dtype,))
    x = b.tame(x)
    if b.chance(0.25):
        other = "0.0" if dtype == FLOAT else "-1"
        out = broadcast(cond.shape, x.shape)
        b.emit(f"torch.where({cond.name}, {x.name}, {other})", out, dtype, (cond, x),
               distinct=False, bound=x.bound, lo=min(x.lo, -1), hi=x.hi)
        return True
    y = b.tame(partner(b, x, (dtype,), lambda v: broadcast(v.shape, cond.shape) is not None))
    out = broadcast(broadcast(x.shape, y.shape), cond.shape)
    if out is None or _numel(out) > MAX_NUMEL:
        return False
    b.emit(f"torch.where({cond.name}, {x.name}, {y.name})", out, dtype, (cond, x, y),
           distinct=False, bound=max(x.bound, y.bound), lo=min(x.lo, y.lo), hi=max(x.hi, y.hi))
    return True


def cast(b: Builder) -> bool:
    a = b.pick(lambda v: v.exact)
    if a is None:
        return False
    if a.dtype == FLOAT:
        if b.chance(0.25):
            b.emit(f"{a.name}.bool()", a.shape, BOOL, (a,), distinct=False, bound=1, hi=1)
            return True
        a = b.tame(a, 1000.0)
        to = b.rng.choice(INTS)
        scale = b.rng.choice((1, 4))
        src = f"({a.name} * {scale})" if scale != 1 else a.name
        hi = int(a.bound * scale) + 1
        b.emit(f"{src}.to({TORCH_DTYPE[to]})", a.shape, to, (a,), distinct=False, bound=hi,
               lo=-hi, hi=hi)
        return True
    to = b.rng.choice([d for d in (FLOAT, INT64, INT32) if d != a.dtype])
    expr = {FLOAT: f"{a.name}.float()", INT64: f"{a.name}.long()",
            INT32: f"{a.name}.to(torch.int32)"}[to]
    b.emit(expr, a.shape, to, (a,), distinct=False, bound=max(abs(a.lo), abs(a.hi)), lo=a.lo,
           hi=a.hi)
    return True


def integer(b: Builder) -> bool:
    a = b.pick(lambda v: v.dtype in INTS)
    if a is None:
        a = b.input(b.shape(b.rng.randint(1, 3)), b.rng.choice(INTS), lo=-30, hi=30)
    name = b.rng.choice(("add", "sub", "mul", "remainder", "floor_div", "trunc_div", "neg",
                         "abs", "bitwise", "bitwise_not", "max"))
    if name in ("neg", "abs", "bitwise_not"):
        lo, hi = {"neg": (-a.hi, -a.lo), "abs": (0, max(abs(a.lo), abs(a.hi))),
                  "bitwise_not": (-a.hi - 1, -a.lo - 1)}[name]
        expr = {"neg": f"-{a.name}", "abs": f"torch.abs({a.name})",
                "bitwise_not": f"torch.bitwise_not({a.name})"}[name]
        b.emit(expr, a.shape, a.dtype, (a,), distinct=False, bound=max(-lo, hi), lo=lo, hi=hi)
        return True
    if name == "remainder":
        k = b.rng.choice((2, 3, 5, 7, 16))
        b.emit(f"torch.remainder({a.name}, {k})", a.shape, a.dtype, (a,), distinct=False,
               bound=k - 1, lo=0, hi=k - 1)
        return True
    c = partner(b, a, (a.dtype,))
    out = broadcast(a.shape, c.shape)
    if name in ("floor_div", "trunc_div"):
        mode = "floor" if name == "floor_div" else "trunc"
        m = max(abs(a.lo), abs(a.hi))
        b.emit(f'torch.div({a.name}, {c.name}.abs() + 1, rounding_mode="{mode}")', out,
               a.dtype, (a, c), distinct=False, bound=m + 1, lo=-m - 1, hi=m + 1)
        return True
    if name == "bitwise":
        op = b.rng.choice("&|^")
        m = 2 * max(abs(a.lo), abs(a.hi), abs(c.lo), abs(c.hi)) + 1
        b.emit(f"{a.name} {op} {c.name}", out, a.dtype, (a, c), distinct=False, bound=m,
               lo=-m, hi=m)
        return True
    if name == "max":
        b.emit(f"torch.maximum({a.name}, {c.name})", out, a.dtype, (a, c), distinct=False,
               bound=max(a.bound, c.bound), lo=max(a.lo, c.lo), hi=max(a.hi, c.hi))
        return True
    if name == "mul":
        corners = [x * y for x in (a.lo, a.hi) for y in (c.lo, c.hi)]
        lo, hi = min(corners), max(corners)
    elif name == "add":
        lo, hi = a.lo + c.lo, a.hi + c.hi
    else:
        lo, hi = a.lo - c.hi, a.hi - c.lo
    if max(-lo, hi) >= 1 << 24:
        return False
    op = {"add": "+", "sub": "-", "mul": "*"}[name]
    b.emit(f"{a.name} {op} {c.name}", out, a.dtype, (a, c), distinct=False, bound=max(-lo, hi),
           lo=lo, hi=hi)
    return True


UNITS = {
    "unary": (14, unary),
    "binary": (14, binary),
    "compare": (4, compare),
    "logical": (3, logical),
    "where": (4, where),
    "cast": (4, cast),
    "integer": (4, integer),
}
