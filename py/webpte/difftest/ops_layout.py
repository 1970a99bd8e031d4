"""Op generators: views and layout (reshape, permute, transpose, slice, select, cat,
squeeze, expand, repeat, flip, split, pad) and indexing (index_select, advanced indexing,
embedding), plus tensor creation (zeros/ones/full_like, arange)."""

from __future__ import annotations

import math

from .builder import BOOL, FLOAT, INT64, MAX_NUMEL, Builder, Val


def _any(b: Builder, rank_min: int = 1, pred=lambda v: True) -> Val | None:
    return b.pick(lambda v: v.rank >= rank_min and pred(v))


def _factor(b: Builder, n: int) -> tuple[int, ...]:
    """A random shape with n elements (rank 1-4, size-1 dims sometimes)."""
    dims, rest = [], n
    for _ in range(b.rng.randint(0, 3)):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = b.rng.choice(divisors)
        dims.append(d)
        rest //= d
    dims.append(rest)
    b.rng.shuffle(dims)
    return tuple(dims)


def _dims(shape) -> str:
    return ", ".join(map(str, shape))


def reshape(b: Builder) -> bool:
    a = _any(b, 0)
    if a is None:
        return False
    shape = _factor(b, a.numel)
    if b.chance(0.2) and len(shape) > 1:
        i = b.rng.randrange(len(shape))
        spec = ", ".join("-1" if j == i else str(d) for j, d in enumerate(shape))
    else:
        spec = _dims(shape)
    if b.chance(0.2) and a.rank >= 2:
        s, e = sorted(b.rng.sample(range(a.rank), 2))
        flat = a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:]
        b.emit(f"torch.flatten({a.name}, {s}, {e})", flat, a.dtype, (a,), **_keep(a))
        return True
    method = b.rng.choice(("reshape", "view")) if a.kind != "buffer" else "reshape"
    b.emit(f"{a.name}.{method}({spec})" if method == "reshape" else
           f"{a.name}.contiguous().view({spec})", shape, a.dtype, (a,), **_keep(a))
    return True


def _keep(a: Val) -> dict:
    return dict(exact=a.exact, distinct=a.distinct, bound=a.bound, lo=a.lo, hi=a.hi,
                unique=a.unique and a.rank == 1,
                alias=a.name if a.kind == "buffer" else a.alias)


def permute(b: Builder) -> bool:
    a = _any(b, 2)
    if a is None:
        return False
    if b.chance(0.5):
        perm = list(range(a.rank))
        b.rng.shuffle(perm)
        b.emit(f"{a.name}.permute({_dims(perm)})", [a.shape[p] for p in perm], a.dtype, (a,),
               **_keep(a))
        return True
    i, j = b.rng.sample(range(-a.rank, 0), 2)
    s = list(a.shape)
    s[i], s[j] = s[j], s[i]
    b.emit(f"{a.name}.transpose({i}, {j})", s, a.dtype, (a,), **_keep(a))
    return True


def slice_(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    d = b.rng.randrange(a.rank)
    n = a.shape[d]
    start = b.rng.randint(0, n - 1)
    end = b.rng.randint(start + 1, n)
    step = b.rng.choice((1, 1, 2, 3))
    size = len(range(start, end, step))
    if b.chance(0.3):   # negative start, open end
        start_s, end_s = str(start - n), ""
        size = len(range(start, n, step))
    else:
        start_s, end_s = str(start), str(end)
    idx = ", ".join([":"] * d + [f"{start_s}:{end_s}" + (f":{step}" if step != 1 else "")])
    s = list(a.shape)
    s[d] = size
    b.emit(f"{a.name}[{idx}]", s, a.dtype, (a,), **_keep(a))
    return True


def select(b: Builder) -> bool:
    a = _any(b, 1, lambda v: v.rank >= 2 or b.chance(0.3))
    if a is None:
        return False
    d = b.rng.randrange(a.rank)
    i = b.rng.randrange(a.shape[d]) - (a.shape[d] if b.chance(0.3) else 0)
    s = a.shape[:d] + a.shape[d + 1:]
    expr = (f"{a.name}.select({d}, {i})" if b.chance(0.5)
            else f"{a.name}[{', '.join([':'] * d + [str(i)])}]")
    b.emit(expr, s, a.dtype, (a,), **_keep(a))
    return True


def cat(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    d = b.rng.randrange(a.rank)
    parts = [a]
    for _ in range(b.rng.randint(1, 3)):
        v = b.pick(lambda v: v.dtype == a.dtype and v.rank == a.rank and all(
            x == y for k, (x, y) in enumerate(zip(v.shape, a.shape)) if k != d))
        if v is None or b.chance(0.3):
            s = list(a.shape)
            s[d] = b.dim()
            v = (b.input(tuple(s), a.dtype) if a.dtype in (FLOAT, BOOL)
                 else b.input(tuple(s), a.dtype, lo=a.lo, hi=max(a.hi, a.lo)))
        parts.append(v)
    s = list(a.shape)
    s[d] = sum(p.shape[d] for p in parts)
    names = ", ".join(p.name for p in parts)
    b.emit(f"torch.cat([{names}], {d - a.rank if b.chance(0.3) else d})", s, a.dtype,
           tuple(parts), distinct=len({p.name for p in parts}) == len(parts)
           and all(p.distinct for p in parts),
           bound=max(p.bound for p in parts), lo=min(p.lo for p in parts),
           hi=max(p.hi for p in parts))
    return True


def squeeze(b: Builder) -> bool:
    a = _any(b, 0, lambda v: v.rank < 5)
    if a is None:
        return False
    ones = [i for i, n in enumerate(a.shape) if n == 1]
    if ones and b.chance(0.6):
        if b.chance(0.3):
            s = tuple(n for n in a.shape if n != 1)
            b.emit(f"{a.name}.squeeze()", s, a.dtype, (a,), **_keep(a))
        else:
            d = b.rng.choice(ones)
            b.emit(f"{a.name}.squeeze({d})", a.shape[:d] + a.shape[d + 1:], a.dtype, (a,),
                   **_keep(a))
        return True
    d = b.rng.randint(0, a.rank)
    b.emit(f"{a.name}.unsqueeze({d})", a.shape[:d] + (1,) + a.shape[d:], a.dtype, (a,),
           **_keep(a))
    return True


def expand(b: Builder) -> bool:
    a = _any(b, 0, lambda v: 1 in v.shape or v.rank < 3)
    if a is None:
        return False
    lead = tuple(b.dim() for _ in range(b.rng.randint(0, 1 if a.rank < 4 else 0)))
    s = lead + tuple(b.dim() if n == 1 and b.chance(0.7) else n for n in a.shape)
    if math.prod(s) > MAX_NUMEL or s == a.shape:
        return False
    spec = ", ".join([str(n) for n in lead] + [str(n) if n != m or b.chance(0.5) else "-1"
                                              for n, m in zip(s[len(lead):], a.shape)])
    b.emit(f"{a.name}.expand({spec})", s, a.dtype, (a,), **{**_keep(a), "distinct": False})
    return True


def repeat(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    reps = [b.rng.choice((1, 1, 2, 3)) for _ in range(a.rank + b.rng.randint(0, 1))]
    lead = len(reps) - a.rank
    s = tuple(reps[:lead]) + tuple(n * r for n, r in zip(a.shape, reps[lead:]))
    if math.prod(s) > MAX_NUMEL:
        return False
    b.emit(f"{a.name}.repeat({_dims(reps)})", s, a.dtype, (a,),
           **{**_keep(a), "distinct": a.distinct and math.prod(reps) == 1})
    return True


def flip(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    dims = sorted(b.rng.sample(range(a.rank), b.rng.randint(1, a.rank)))
    b.emit(f"torch.flip({a.name}, [{_dims(dims)}])", a.shape, a.dtype, (a,), **_keep(a))
    return True


def split(b: Builder) -> bool:
    a = _any(b, 1, lambda v: max(v.shape) >= 2)
    if a is None:
        return False
    d = b.rng.choice([i for i, n in enumerate(a.shape) if n >= 2])
    n = a.shape[d]
    if b.chance(0.4):
        size = b.rng.randint(1, n - 1)
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        expr = f"torch.split({a.name}, {size}, {d})"
    else:
        cuts = sorted(b.rng.sample(range(1, n), min(n - 1, b.rng.randint(1, 3))))
        sizes = [y - x for x, y in zip([0] + cuts, cuts + [n])]
        expr = f"torch.split({a.name}, [{_dims(sizes)}], dim={d})"
    if len(sizes) > 6:
        return False
    b.emit_many(expr, [dict(shape=a.shape[:d] + (k,) + a.shape[d + 1:], dtype=a.dtype,
                            **_keep(a)) for k in sizes], (a,))
    return True


def pad(b: Builder) -> bool:
    a = _any(b, 1, lambda v: v.dtype == FLOAT)
    if a is None:
        return False
    k = b.rng.randint(1, min(2, a.rank))
    amounts = [b.rng.randint(0, 2) for _ in range(2 * k)]
    s = list(a.shape)
    for i in range(k):
        s[-1 - i] += amounts[2 * i] + amounts[2 * i + 1]
    b.emit(f"F.pad({a.name}, ({_dims(amounts)},), value=-0.5)", s, FLOAT, (a,),
           **{**_keep(a), "distinct": a.distinct and not any(amounts)})
    return True


def index_select(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    d = b.rng.randrange(a.rank)
    idx = _indices(b, (b.rng.randint(1, 7),), a.shape[d], rank=1)
    s = a.shape[:d] + idx.shape + a.shape[d + 1:]
    b.emit(f"torch.index_select({a.name}, {d}, {idx.name})", s, a.dtype, (a, idx),
           **{**_keep(a), "distinct": a.distinct and idx.unique})
    return True


def _indices(b: Builder, shape, size: int, rank: int | None = None) -> Val:
    """int64 indices in [0, size): a fitting pool value or a new input of `shape`."""
    v = b.pick(lambda v: v.dtype == INT64 and v.exact and 0 <= v.lo and v.hi < size
               and (rank is None or v.rank == rank) and 0 < v.rank <= 2)
    if v is None or b.chance(0.4):
        v = b.index_input(tuple(shape), size, unique=len(shape) == 1 and shape[0] <= size
                          and b.chance(0.5))
    return v


def index_tensor(b: Builder) -> bool:
    a = _any(b, 1)
    if a is None:
        return False
    d = 0 if a.rank == 1 or b.chance(0.6) else b.rng.randrange(a.rank)
    shape = (b.rng.randint(1, 6),) if b.chance(0.7) else (b.rng.randint(1, 3), b.dim())
    idx = _indices(b, shape, a.shape[d])
    s = a.shape[:d] + idx.shape + a.shape[d + 1:]
    if math.prod(s) > MAX_NUMEL:
        return False
    where = ", ".join([":"] * d + [idx.name])
    b.emit(f"{a.name}[{where}]", s, a.dtype, (a, idx),
           **{**_keep(a), "distinct": a.distinct and idx.unique})
    return True


def embedding(b: Builder) -> bool:
    num, dim = b.rng.choice((3, 7, 11, 16, 31)), b.rng.choice((1, 4, 5, 8, 13))
    shape = (b.rng.randint(1, 9),) if b.chance(0.5) else (b.rng.randint(1, 3),
                                                          b.rng.randint(1, 7))
    idx = _indices(b, shape, num)
    emb = b.module("emb", f"nn.Embedding({num}, {dim})")
    b.emit(f"{emb}({idx.name})", idx.shape + (dim,), FLOAT, (idx,), exact=True,
           distinct=idx.unique, bound=4.0)
    return True


def create(b: Builder) -> bool:
    a = _any(b, 0)
    if a is None:
        return False
    kind = b.rng.choice(("zeros_like", "ones_like", "full_like", "arange", "mask"))
    if kind == "arange":
        n = b.dim() + 1
        v = b.emit(f"torch.arange({n}, dtype=torch.int64)", (n,), INT64, (), distinct=True,
                   bound=n, lo=0, hi=n - 1, unique=True)
        del v
        return True
    if kind == "mask":   # a causal mask for the last two dims
        if a.rank < 2:
            return False
        r, c = a.shape[-2:]
        b.emit(f"torch.ones({r}, {c}, dtype=torch.bool).tril()", (r, c), BOOL, (),
               distinct=False, bound=1, hi=1)
        return True
    fill = {"zeros_like": "torch.zeros_like({a})", "ones_like": "torch.ones_like({a})",
            "full_like": "torch.full_like({a}, 3)"}[kind]
    val = {"zeros_like": 0, "ones_like": 1, "full_like": 3}[kind]
    b.emit(fill.format(a=a.name), a.shape, a.dtype, (a,), exact=True, distinct=False,
           bound=3.0, lo=val, hi=val)
    return True


UNITS = {
    "reshape": (6, reshape),
    "permute": (5, permute),
    "slice": (5, slice_),
    "select": (3, select),
    "cat": (4, cat),
    "squeeze": (3, squeeze),
    "expand": (3, expand),
    "repeat": (2, repeat),
    "flip": (2, flip),
    "split": (3, split),
    "pad": (2, pad),
    "index_select": (2, index_select),
    "index": (3, index_tensor),
    "embedding": (2, embedding),
    "create": (2, create),
}
