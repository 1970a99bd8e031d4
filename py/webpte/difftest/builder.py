"""Seeded generation of valid PyTorch programs as Python source text (no torch needed here).

A `Builder` keeps a pool of values whose shape, dtype and numeric properties it tracks
itself; each op generator (ops_*.py) picks operands from the pool that satisfy the op's
constraints, emits one line of `forward` and adds its results to the pool. The source is
self-contained: `build()` makes the module (seeded parameters, zero buffers), and
`make_inputs(call)` its inputs for each call, so a saved reproducer runs on its own.

Numeric properties keep the comparison meaningful without tolerance games:
`exact` values are bitwise the same on any IEEE device (inputs through exactly rounded ops:
add, mul, max, layout, ...); only they feed discontinuous ops (comparisons, casts, round,
argmax). `distinct` values have no two equal elements (continuous random data), needed for
indices of max/argmax/sort and a nonzero spread under layer/group norm. `bound` estimates
the largest magnitude; operands above BOUND are scaled down by a power of two first.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

MAX_NUMEL = 4096      # elements of any value
MAX_RANK = 4
BOUND = 64.0          # float operands above this are scaled down first (exactly)
DIMS = (1, 1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 16, 17)
FLOAT, INT64, INT32, BOOL = "float32", "int64", "int32", "bool"
INTS = (INT64, INT32)
TORCH_DTYPE = {FLOAT: "torch.float32", INT64: "torch.int64", INT32: "torch.int32",
               BOOL: "torch.bool"}


@dataclass
class Val:
    """One value of `forward`: a tensor the generator knows the shape and properties of."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    exact: bool = True
    distinct: bool = True
    bound: float = 4.0            # floats: |element| estimate; ints: max(|lo|, |hi|)
    lo: int = 0                   # ints: value range [lo, hi]
    hi: int = 0
    unique: bool = False          # ints: no value repeats (index_put targets)
    kind: str = "value"           # value | input | buffer
    alias: str | None = None      # the buffer this may be a view of (never written from)
    uses: int = 0

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    how: str                      # a torch expression with `g` the generator


@dataclass
class ProgramSource:
    """A generated program: its seed, the module source and what it is made of."""

    seed: int
    source: str
    ops: list[str]
    calls: int
    buffers: int


@dataclass
class Builder:
    rng: random.Random
    seed: int
    pool: list[Val] = field(default_factory=list)
    inputs: list[InputSpec] = field(default_factory=list)
    init: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    buffers: dict[str, Val] = field(default_factory=dict)
    observed: set[str] = field(default_factory=set)   # buffers read after their last write
    # ExecuTorch 1.5.1 bakes a buffer read in one delegate and written in another into the
    # first as a constant (tests/fixtures/difftest/buffer_baked_into_delegate.py), so a
    # program reads a buffer before its add_ or writes one by index or slice (a portable
    # kernel that splits the delegates), not both.
    read_before_add: bool = False
    split_write: bool = False

    # -- names and shapes -------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0)
        self.counters[prefix] = n + 1
        return f"{prefix}{n}"

    def dim(self) -> int:
        return self.rng.choice(DIMS)

    def shape(self, rank: int | None = None, cap: int = 1024) -> tuple[int, ...]:
        if rank is None:
            rank = self.rng.choices((0, 1, 2, 3, 4), (1, 6, 10, 8, 6))[0]
        while True:
            s = tuple(self.dim() for _ in range(rank))
            if math.prod(s) <= cap:
                return s

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- the pool ---------------------------------------------------------------------
    def pick(self, pred=lambda v: True) -> Val | None:
        """A pool value satisfying `pred`, later (deeper) values more likely."""
        cands = [(i, v) for i, v in enumerate(self.pool) if pred(v)]
        if not cands:
            return None
        weights = [1 + i + (3 if v.uses == 0 and v.kind == "value" else 0) for i, v in cands]
        return self.rng.choices([v for _, v in cands], weights)[0]

    def input(self, shape: tuple[int, ...], dtype: str = FLOAT, *, lo: int = 0, hi: int = 0,
              unique: bool = False, scale: float = 1.0) -> Val:
        """A new program input: normal floats (never zero), ints in [lo, hi], bools, or
        `unique` ints (a permutation's prefix)."""
        name = f"x{len(self.inputs)}"
        size = f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"
        if dtype == FLOAT:
            how = f"torch.randn({size}, generator=g)" + (f" * {scale}" if scale != 1 else "")
            v = Val(name, shape, dtype, bound=3.5 * scale, kind="input")
        elif dtype == BOOL:
            how = f"torch.rand({size}, generator=g) < 0.5"
            v = Val(name, shape, dtype, distinct=False, bound=1, lo=0, hi=1, kind="input")
        elif unique:
            assert len(shape) == 1 and hi - lo + 1 >= shape[0]
            how = f"(torch.randperm({hi - lo + 1}, generator=g)[:{shape[0]}] + {lo})"
            if dtype != INT64:
                how += f".to({TORCH_DTYPE[dtype]})"
            v = Val(name, shape, dtype, distinct=True, bound=max(abs(lo), abs(hi)), lo=lo,
                    hi=hi, unique=True, kind="input")
        else:
            how = f"torch.randint({lo}, {hi + 1}, {size}, generator=g, dtype={TORCH_DTYPE[dtype]})"
            v = Val(name, shape, dtype, distinct=False, bound=max(abs(lo), abs(hi)), lo=lo,
                    hi=hi, kind="input")
        self.inputs.append(InputSpec(name, shape, dtype, how))
        self.pool.append(v)
        return v

    def index_input(self, shape: tuple[int, ...], size: int, unique: bool = False) -> Val:
        """int64 indices into a dim of `size`."""
        return self.input(shape, INT64, lo=0, hi=size - 1, unique=unique)

    def emit(self, expr: str, shape, dtype: str, operands=(), **props) -> Val:
        """`vN = expr`: a new pool value. Unless given, `exact` is all operands' exact."""
        for o in operands:
            o.uses += 1
            if o.kind == "buffer":
                self.observed.add(o.name)
        props.setdefault("exact", all(o.exact for o in operands))
        v = Val(self.fresh("v"), tuple(shape), dtype, **props)
        if v.numel > MAX_NUMEL or v.rank > MAX_RANK:
            raise TooBig(v.shape)
        self.body.append(f"{v.name} = {expr}")
        self.pool.append(v)
        return v

    def emit_many(self, expr: str, results: list[dict], operands=()) -> list[Val]:
        """`va, vb = expr` for multi-output ops; `results` hold each Val's fields."""
        for o in operands:
            o.uses += 1
            if o.kind == "buffer":
                self.observed.add(o.name)
        vals = [Val(self.fresh("v"), **r) for r in results]
        if any(v.numel > MAX_NUMEL or v.rank > MAX_RANK for v in vals):
            raise TooBig(vals[0].shape)
        self.body.append(f"{', '.join(v.name for v in vals)}{',' if len(vals) == 1 else ''} "
                         f"= {expr}")
        self.pool.extend(vals)
        return vals

    def module(self, prefix: str, ctor: str) -> str:
        name = self.fresh(prefix)
        self.init.append(f"self.{name} = {ctor}")
        return f"self.{name}"

    def float_operand(self, pred=lambda v: True, rank_min: int = 0, limit: float = BOUND) -> Val:
        """A float pool value (or a new input) of rank >= rank_min, scaled below `limit`."""
        v = self.pick(lambda v: v.dtype == FLOAT and v.rank >= rank_min and pred(v))
        if v is None:
            v = self.input(self.shape(self.rng.randint(max(rank_min, 1), 4)))
        return self.tame(v, limit)

    def tame(self, v: Val, limit: float = BOUND) -> Val:
        """v itself, or v times a power of two that brings its bound under `limit` (exact)."""
        if v.dtype != FLOAT or v.bound <= limit:
            return v
        k = math.ceil(math.log2(v.bound / limit))
        return self.emit(f"{v.name} * {2.0 ** -k!r}", v.shape, FLOAT, (v,), distinct=v.distinct,
                         bound=v.bound * 2.0 ** -k)

    # -- the source -------------------------------------------------------------------
    def source(self, outputs: list[Val], calls: int) -> str:
        args = ", ".join(["self"] + [i.name for i in self.inputs])
        init = "\n".join(f"        {line}" for line in self.init) or "        pass"
        body = "\n".join(f"        {line}" for line in self.body)
        ret = ", ".join(o.name for o in outputs) + ("," if len(outputs) == 1 else "")
        make = "\n".join(f"        {i.how},  # {i.name}: {i.dtype}{list(i.shape)}"
                         for i in self.inputs)
        return f'''"""difftest program {self.seed}: {", ".join(self.ops)}."""

import torch
import torch.nn.functional as F  # noqa: F401
from torch import nn  # noqa: F401

SEED = {self.seed}
CALLS = {calls}


class Program(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward({args}):
{body}
        return ({ret})


def build():
    torch.manual_seed(SEED)
    m = Program().eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 7919 + call)
    return (
{make}
    )
'''


class TooBig(Exception):
    """An op would make a value over MAX_NUMEL elements or MAX_RANK dims; the generator
    tries another op."""


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast shape of a and b, or None."""
    out = []
    for x, y in zip(((1,) * (len(b) - len(a)) + a), ((1,) * (len(a) - len(b)) + b)):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)
