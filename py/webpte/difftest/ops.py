"""The op generators of every family, weighted, and how a program ends (its outputs)."""

from __future__ import annotations

from . import ops_elementwise, ops_layout, ops_nn, ops_state
from .builder import Builder, Val

# generator name -> (weight, fn(Builder) -> bool)
OPS = {**ops_elementwise.UNITS, **ops_layout.UNITS, **ops_nn.UNITS, **ops_state.UNITS}
MAX_OUTPUTS = 8


def finish(b: Builder) -> tuple[list[Val], int]:
    """(outputs, calls): every buffer written is read after its last write; inputs nothing
    read are read (but in one program of ten); the outputs are the values nothing consumed
    (the latest first, at most MAX_OUTPUTS), never an input or a buffer itself; programs
    with state run two calls so the second sees the first's writes."""
    for name, buf in b.buffers.items():
        if name not in b.observed:
            b.emit(f"{name} * 1.0", buf.shape, buf.dtype, (buf,), distinct=False,
                   bound=buf.bound)
    unused = [v for v in b.pool if v.kind == "input" and v.uses == 0]
    if len(unused) == len(b.inputs) or not b.chance(0.1):   # an unused input, sometimes
        for a in unused:
            _consume(b, a)
    values = [v for v in b.pool if v.kind == "value"]
    leaves = [v for v in values if v.uses == 0][::-1][:MAX_OUTPUTS]
    if not leaves:
        leaves = [values[-1]]
    return leaves, 2 if b.buffers else 1


def _consume(b: Builder, a: Val) -> Val:
    """One op reading input `a`, so the program uses it."""
    if a.dtype == "float32":
        return b.emit(f"{a.name} * 2.0", a.shape, a.dtype, (a,), distinct=a.distinct,
                      bound=2 * a.bound)
    if a.dtype == "bool":
        return b.emit(f"~{a.name}", a.shape, a.dtype, (a,), distinct=False, bound=1, hi=1)
    return b.emit(f"{a.name} + 1", a.shape, a.dtype, (a,), distinct=a.distinct,
                  bound=a.bound + 1, lo=a.lo + 1, hi=a.hi + 1)
