"""Op generators: matmul / linear, reductions (with indices), softmax, layer / group / batch
norm, convolution, pooling, upsampling and pixel shuffle."""

from __future__ import annotations

import math

from .builder import BOOL, FLOAT, INT64, INTS, MAX_NUMEL, Builder


def _mat_limit(k: int) -> float:
    """Operand bound for a k-long dot product, so sums stay near BOUND."""
    return max(1.0, 8.0 / math.sqrt(k))


def linear(b: Builder) -> bool:
    a = b.float_operand(rank_min=1)
    k = a.shape[-1]
    a = b.tame(a, _mat_limit(k))
    n = b.dim()
    out = a.shape[:-1] + (n,)
    bound = a.bound * k * 0.6 + 1
    form = b.rng.choice(("linear", "linear", "matmul", "addmm", "functional"))
    if form == "linear":
        lin = b.module("lin", f"nn.Linear({k}, {n}, bias={b.chance(0.7)})")
        b.emit(f"{lin}({a.name})", out, FLOAT, (a,), exact=False, distinct=False, bound=bound)
    elif form == "matmul":
        w = b.module("w", f"nn.Parameter(torch.randn({k}, {n}) * 0.5)")
        b.emit(f"torch.matmul({a.name}, {w})", out, FLOAT, (a,), exact=False, distinct=False,
               bound=bound)
    elif form == "addmm":
        if a.rank != 2:
            return False
        w = b.module("w", f"nn.Parameter(torch.randn({k}, {n}) * 0.5)")
        bias = b.module("bias", f"nn.Parameter(torch.randn({n}))")
        b.emit(f"torch.addmm({bias}, {a.name}, {w})", out, FLOAT, (a,), exact=False,
               distinct=False, bound=bound + 3)
    else:
        w = b.module("w", f"nn.Parameter(torch.randn({n}, {k}) * 0.5)")
        b.emit(f"F.linear({a.name}, {w})", out, FLOAT, (a,), exact=False, distinct=False,
               bound=bound)
    return True


def matmul(b: Builder) -> bool:
    """Two activations: mm (2-D), bmm (3-D) or batched @ (4-D)."""
    a = b.float_operand(lambda v: v.rank in (2, 3, 4), rank_min=2)
    if a.rank == 1:
        return False
    m, k = a.shape[-2:]
    a = b.tame(a, _mat_limit(k))
    n = b.dim()
    bshape = a.shape[:-2] + (k, n)
    c = b.pick(lambda v: v.dtype == FLOAT and v.shape == bshape and v is not a)
    c = b.tame(c if c is not None else b.input(bshape), _mat_limit(k))
    out = a.shape[:-2] + (m, n)
    expr = {2: "torch.mm({a}, {c})", 3: "torch.bmm({a}, {c})", 4: "{a} @ {c}"}[a.rank]
    b.emit(expr.format(a=a.name, c=c.name), out, FLOAT, (a, c), exact=False, distinct=False,
           bound=a.bound * c.bound * k * 0.6 + 1)
    return True


def reduce(b: Builder) -> bool:
    a = b.pick(lambda v: v.rank >= 1)
    if a is None:
        return False
    name = b.rng.choice(("sum", "mean", "amax", "amin", "any", "full_sum"))
    if a.dtype == BOOL and name != "any" and name != "full_sum":
        name = "any"
    if name == "mean" and a.dtype != FLOAT:
        name = "sum"
    if name == "full_sum":
        if a.dtype != FLOAT:
            return False
        a = b.tame(a, 8.0)
        b.emit(f"{a.name}.sum()", (), FLOAT, (a,), exact=False, distinct=False,
               bound=a.bound * a.numel)
        return True
    dims = sorted(b.rng.sample(range(a.rank), b.rng.randint(1, min(2, a.rank))))
    if name == "any":
        dims = dims[:1]
    keep = b.chance(0.4)
    shape = tuple(1 if i in dims else n for i, n in enumerate(a.shape) if keep or i not in dims)
    spec = str(dims[0]) if len(dims) == 1 and b.chance(0.5) else f"[{', '.join(map(str, dims))}]"
    count = math.prod(a.shape[i] for i in dims)
    if name == "any":
        src = a.name if a.dtype == BOOL else f"({a.name} > 0)"
        if a.dtype != BOOL and not a.exact:
            return False
        b.emit(f"torch.any({src}, {dims[0]}, keepdim={keep})", shape, BOOL, (a,),
               distinct=False, bound=1, hi=1)
        return True
    if a.dtype == FLOAT:
        a = b.tame(a, 16.0)
    exact = name in ("amax", "amin") and a.exact
    if name == "sum" and a.dtype in INTS:
        lo, hi = a.lo * count, a.hi * count
        if max(-lo, hi) >= 1 << 24:
            return False
        b.emit(f"{a.name}.sum({spec}, keepdim={keep})", shape, INT64, (a,), exact=True,
               distinct=False, bound=max(-lo, hi), lo=lo, hi=hi)
        return True
    bound = a.bound * (count if name == "sum" else 1)
    b.emit(f"torch.{name}({a.name}, {spec}, keepdim={keep})", shape, a.dtype, (a,),
           exact=exact or a.dtype != FLOAT, distinct=False, bound=bound, lo=a.lo, hi=a.hi)
    return True


def arg_reduce(b: Builder) -> bool:
    """argmax / argmin and max / min with indices: exact, distinct operands only (ties and
    near-ties would make the indices a coin toss)."""
    a = b.pick(lambda v: v.rank >= 1 and v.dtype == FLOAT and v.exact and v.distinct)
    if a is None:
        return False
    d = b.rng.randrange(a.rank)
    keep = b.chance(0.4)
    n = a.shape[d]
    shape = tuple(1 if i == d else s for i, s in enumerate(a.shape) if keep or i != d)
    name = b.rng.choice(("argmax", "argmin", "max", "min", "full_argmax"))
    if name == "full_argmax":
        b.emit(f"torch.argmax({a.name})", (), INT64, (a,), exact=True, distinct=False,
               bound=a.numel, lo=0, hi=a.numel - 1)
        return True
    if name.startswith("arg"):
        b.emit(f"torch.{name}({a.name}, dim={d}, keepdim={keep})", shape, INT64, (a,),
               exact=True, distinct=False, bound=n, lo=0, hi=n - 1)
        return True
    b.emit_many(f"torch.{name}({a.name}, {d}, keepdim={keep})",
                [dict(shape=shape, dtype=FLOAT, exact=True, distinct=False, bound=a.bound),
                 dict(shape=shape, dtype=INT64, exact=True, distinct=False, bound=n, lo=0,
                      hi=n - 1)], (a,))
    return True


def softmax(b: Builder) -> bool:
    a = b.float_operand(rank_min=1, limit=16.0)
    d = b.rng.randrange(-a.rank, a.rank)
    if b.chance(0.3):
        b.emit(f"torch.log_softmax({a.name}, dim={d})", a.shape, FLOAT, (a,), exact=False,
               distinct=False, bound=a.bound * 2 + math.log(a.shape[d]) + 1)
    else:
        b.emit(f"torch.softmax({a.name}, {d})", a.shape, FLOAT, (a,), exact=False,
               distinct=False, bound=1.0)
    return True


def norm(b: Builder) -> bool:
    """layer_norm (distinct operands: a spread of zero divides rounding noise by sqrt(eps)),
    group_norm, batch_norm in eval mode."""
    kind = b.rng.choice(("layer", "layer", "group", "batch"))
    if kind == "batch":
        a = b.float_operand(lambda v: v.rank in (2, 3, 4), rank_min=2)
        if a.rank < 2:
            return False
        c = a.shape[1]
        bn = b.module("bn", f"nn.BatchNorm{2 if a.rank == 4 else 1}d({c})")
        b.init.append(f"{bn}.running_mean.uniform_(-0.5, 0.5)")
        b.init.append(f"{bn}.running_var.uniform_(0.5, 2.0)")
        b.init.append(f"nn.init.uniform_({bn}.weight, 0.5, 1.5)")
        b.init.append(f"nn.init.uniform_({bn}.bias, -0.5, 0.5)")
        b.emit(f"{bn}({a.name})", a.shape, FLOAT, (a,), exact=False, distinct=False,
               bound=a.bound * 2 + 1)
        return True
    a = b.pick(lambda v: v.dtype == FLOAT and v.distinct and v.rank >= (3 if kind == "group"
                                                                         else 1))
    if a is None:
        a = b.input(b.shape(b.rng.randint(3 if kind == "group" else 1, 4)))
    a = b.tame(a, 16.0)
    if kind == "group":
        c = a.shape[1]
        g = b.rng.choice([d for d in range(1, c + 1) if c % d == 0])
        if math.prod(a.shape[1:]) // g < 2:
            return False
        gn = b.module("gn", f"nn.GroupNorm({g}, {c}, affine={b.chance(0.6)})")
        b.emit(f"{gn}({a.name})", a.shape, FLOAT, (a,), exact=False, distinct=False, bound=8.0)
        return True
    k = b.rng.randint(1, min(2, a.rank))
    shape = a.shape[-k:]
    if math.prod(shape) < 2:
        return False
    bound = math.sqrt(math.prod(shape)) + 1
    if b.chance(0.3):
        b.emit(f"F.layer_norm({a.name}, {tuple(shape)}, eps=1e-5)", a.shape, FLOAT, (a,),
               exact=False, distinct=False, bound=bound)
        return True
    ln = b.module("ln", f"nn.LayerNorm({tuple(shape)}, elementwise_affine={b.chance(0.7)})")
    if "elementwise_affine=True" in b.init[-1]:
        b.init.append(f"nn.init.uniform_({ln}.weight, 0.5, 1.5)")
        b.init.append(f"nn.init.uniform_({ln}.bias, -0.5, 0.5)")
    b.emit(f"{ln}({a.name})", a.shape, FLOAT, (a,), exact=False, distinct=False,
           bound=bound * 1.5 + 0.5)
    return True


def _out(n: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def conv(b: Builder) -> bool:
    a = b.float_operand(lambda v: v.rank in (3, 4), rank_min=3, limit=4.0)
    if a.rank not in (3, 4):
        return False
    spatial = a.shape[2:]
    c = a.shape[1]
    groups = b.rng.choice([g for g in (1, 1, 2, 3, c) if c % g == 0])
    o = groups * b.rng.randint(1, 4)
    k, s, d = b.rng.choice((1, 2, 3, 3, 5)), b.rng.choice((1, 1, 2)), b.rng.choice((1, 1, 2))
    p = b.rng.randint(0, k // 2)
    outs = [_out(n, k, s, p, d) for n in spatial]
    if min(outs) < 1:
        return False
    nd = len(spatial)
    conv_ = b.module("conv", f"nn.Conv{nd}d({c}, {o}, {k}, stride={s}, padding={p}, "
                             f"dilation={d}, groups={groups}, bias={b.chance(0.7)})")
    shape = (a.shape[0], o, *outs)
    if math.prod(shape) > MAX_NUMEL:
        return False
    b.emit(f"{conv_}({a.name})", shape, FLOAT, (a,), exact=False, distinct=False,
           bound=a.bound * math.sqrt(c // groups * k ** nd) + 1)
    return True


def pool(b: Builder) -> bool:
    a = b.float_operand(lambda v: v.rank == 4 and min(v.shape[2:]) >= 2, rank_min=4)
    if a.rank != 4:
        return False
    h, w = a.shape[2:]
    k = b.rng.randint(1, min(3, h, w))
    s = b.rng.choice((1, 2, k))
    p = b.rng.randint(0, k // 2)
    shape = a.shape[:2] + (_out(h, k, s, p), _out(w, k, s, p))
    kind = b.rng.choice(("avg", "max", "max_indices"))
    if kind == "avg":
        b.emit(f"F.avg_pool2d({a.name}, {k}, stride={s}, padding={p}, "
               f"count_include_pad={b.chance(0.5)})", shape, FLOAT, (a,), exact=False,
               distinct=False, bound=a.bound)
    elif kind == "max":
        b.emit(f"F.max_pool2d({a.name}, {k}, stride={s}, padding={p})", shape, FLOAT, (a,),
               distinct=False, bound=a.bound)
    else:
        if not (a.exact and a.distinct):
            return False
        b.emit_many(f"F.max_pool2d({a.name}, {k}, stride={s}, padding={p}, "
                    f"return_indices=True)",
                    [dict(shape=shape, dtype=FLOAT, exact=True, distinct=False, bound=a.bound),
                     dict(shape=shape, dtype=INT64, exact=True, distinct=False, bound=h * w,
                          lo=0, hi=h * w - 1)], (a,))
    return True


def resample(b: Builder) -> bool:
    a = b.float_operand(lambda v: v.rank == 4, rank_min=4)
    if a.rank != 4:
        return False
    kind = b.rng.choice(("nearest", "bilinear", "bilinear_ac", "shuffle", "unshuffle"))
    n, c, h, w = a.shape
    if kind == "shuffle":
        r = b.rng.choice([r for r in (2, 3) if c % (r * r) == 0] or [0])
        if not r:
            return False
        b.emit(f"F.pixel_shuffle({a.name}, {r})", (n, c // (r * r), h * r, w * r), FLOAT, (a,),
               distinct=a.distinct, bound=a.bound)
        return True
    if kind == "unshuffle":
        r = b.rng.choice([r for r in (2, 3) if h % r == 0 and w % r == 0] or [0])
        if not r:
            return False
        b.emit(f"F.pixel_unshuffle({a.name}, {r})", (n, c * r * r, h // r, w // r), FLOAT,
               (a,), distinct=a.distinct, bound=a.bound)
        return True
    size = (h * 2, w * 2) if b.chance(0.6) else (b.rng.randint(1, 9), b.rng.randint(1, 9))
    if n * c * size[0] * size[1] > MAX_NUMEL:
        return False
    mode = "nearest" if kind == "nearest" else "bilinear"
    extra = ", align_corners=True" if kind == "bilinear_ac" else (
        ", align_corners=False" if mode == "bilinear" else "")
    b.emit(f'F.interpolate({a.name}, size={size}, mode="{mode}"{extra})', (n, c, *size), FLOAT,
           (a,), exact=mode == "nearest" and a.exact, distinct=False, bound=a.bound)
    return True


UNITS = {
    "linear": (7, linear),
    "matmul": (4, matmul),
    "reduce": (6, reduce),
    "arg_reduce": (3, arg_reduce),
    "softmax": (4, softmax),
    "norm": (5, norm),
    "conv": (4, conv),
    "pool": (3, pool),
    "resample": (2, resample),
}
