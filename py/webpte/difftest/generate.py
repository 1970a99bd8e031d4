"""The program of a seed: ops drawn from ops_*.OPS by a Builder (difftest/builder.py)."""

from __future__ import annotations

import random

from .builder import Builder, ProgramSource, TooBig
from .ops import OPS, finish


def generate(seed: int, ops: int | None = None) -> ProgramSource:
    """The program of `seed`: 3-12 ops drawn from ops_*.OPS, as module source text."""
    rng = random.Random(f"difftest:{seed}")
    b = Builder(rng, seed)
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        b.input(b.shape(rng.choices((1, 2, 3, 4), (3, 4, 4, 3))[0]))
    want = ops if ops is not None else rng.randint(3, 12)
    names, weights = zip(*[(n, w) for n, (w, _) in OPS.items()])
    done = tries = 0
    while done < want and tries < 50 * want:
        tries += 1
        name = rng.choices(names, weights)[0]
        snapshot = _snapshot(b)
        try:
            ok = OPS[name][1](b)
        except TooBig:
            ok = False
        if ok:
            b.ops.append(name)
            done += 1
        else:
            _restore(b, snapshot)
    outputs, calls = finish(b)
    return ProgramSource(seed, b.source(outputs, calls), list(b.ops), calls, len(b.buffers))


def _snapshot(b: Builder):
    return (list(b.pool), len(b.inputs), len(b.init), len(b.body), dict(b.counters),
            dict(b.buffers), set(b.observed), [v.uses for v in b.pool])


def _restore(b: Builder, s) -> None:
    """Undo a failed op generator's partial emissions."""
    pool, ninp, ninit, nbody, counters, buffers, observed, uses = s
    b.pool[:] = pool
    del b.inputs[ninp:], b.init[ninit:], b.body[nbody:]
    b.counters, b.buffers, b.observed = counters, buffers, observed
    for v, u in zip(b.pool, uses):
        v.uses = u
