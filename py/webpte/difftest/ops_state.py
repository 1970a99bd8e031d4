"""Op generators: buffers mutated in place (register_buffer + add_ / index_put_ / copy_ /
index_copy_, the way a KV cache is written) and a few ops webpte has no unit for (topk,
sort, cumsum, gather, log), which must end in a typed refusal that names the op."""

from __future__ import annotations

import math

from .builder import FLOAT, INT64, MAX_NUMEL, MAX_RANK, Builder, TooBig, Val


def _buffer(b: Builder, shape: tuple[int, ...]) -> Val:
    if math.prod(shape) > MAX_NUMEL or len(shape) > MAX_RANK:
        raise TooBig(shape)
    name = b.fresh("buf")
    b.init.append(f'self.register_buffer("{name}", torch.zeros({", ".join(map(str, shape))}'
                  f'{"," if len(shape) == 1 else ""}))')
    v = Val(f"self.{name}", shape, FLOAT, exact=True, distinct=False, bound=0.0, kind="buffer")
    b.buffers[v.name] = v
    return v


def _written(b: Builder, buf: Val, src: Val, accumulates: bool, calls: int = 2) -> None:
    """After a write: the pool's entry for `buf` holds the new contents' properties."""
    b.pool[:] = [v for v in b.pool if v.name != buf.name]
    new = Val(buf.name, buf.shape, FLOAT, exact=buf.exact and src.exact, distinct=False,
              bound=(buf.bound + src.bound * calls) if accumulates else max(buf.bound, src.bound),
              kind="buffer")
    b.buffers[buf.name] = new
    b.pool.append(new)
    b.observed.discard(buf.name)
    src.uses += 1


def mutate(b: Builder) -> bool:
    """Write a buffer: an existing one or a new one shaped for the value written."""
    kind = b.rng.choice(("add", "add", "index_put", "index_put", "copy", "index_copy",
                         "slice"))
    src = b.float_operand(lambda v: v.kind != "buffer" and v.alias is None,
                          rank_min=1 if kind != "add" else 0, limit=16.0)
    if src.kind == "buffer" or src.alias is not None:
        return False
    buf = b.pick(lambda v: v.kind == "buffer")
    if kind == "add":
        if buf is None or buf.shape != src.shape and not _broadcasts_to(src.shape, buf.shape):
            buf = _buffer(b, src.shape if src.rank else (b.dim(),))
        read = b.chance(0.5)    # read the state before the write, as attention reads a cache
        if read and not b.split_write:
            b.read_before_add = True
            b.emit(f"{buf.name} * 0.5", buf.shape, FLOAT, (buf,), distinct=False,
                   bound=buf.bound * 0.5 + 1)
        b.body.append(f"{buf.name}.add_({src.name})")
        _written(b, buf, src, accumulates=True)
        return True
    if src.rank < 1:
        return False
    rows = src.shape[0]
    if kind in ("index_put", "index_copy", "slice"):
        if b.read_before_add:
            return False
        b.split_write = True
        if buf is None or buf.shape[1:] != src.shape[1:] or buf.shape[0] < rows:
            buf = _buffer(b, (rows + b.rng.randint(0, 5),) + src.shape[1:])
        if kind == "slice":
            start = b.rng.randint(0, buf.shape[0] - rows)
            b.body.append(f"{buf.name}[{start}:{start + rows}] = {src.name}")
        else:
            idx = b.index_input((rows,), buf.shape[0], unique=True)
            idx.uses += 1
            b.body.append(f"{buf.name}[{idx.name}] = {src.name}" if kind == "index_put"
                          else f"{buf.name}.index_copy_(0, {idx.name}, {src.name})")
        _written(b, buf, src, accumulates=False)
        return True
    if buf is None or buf.shape != src.shape:
        buf = _buffer(b, src.shape)
    b.body.append(f"{buf.name}.copy_({src.name})")
    _written(b, buf, src, accumulates=False)
    return True


def _broadcasts_to(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(src[::-1], dst[::-1]))


def unsupported(b: Builder) -> bool:
    """An op with no webpte unit: the program must be refused with the op named."""
    a = b.float_operand(rank_min=1)
    kind = b.rng.choice(("topk", "sort", "cumsum", "gather", "log"))
    d = b.rng.randrange(a.rank)
    n = a.shape[d]
    if kind == "log":
        b.emit(f"torch.log({a.name}.abs() + 1.0)", a.shape, FLOAT, (a,), exact=False,
               distinct=False, bound=math.log(a.bound + 1) + 1)
    elif kind == "cumsum":
        b.emit(f"torch.cumsum({a.name}, {d})", a.shape, FLOAT, (a,), exact=False,
               distinct=False, bound=a.bound * n)
    elif kind == "gather":
        idx = b.index_input(a.shape, n)
        b.emit(f"torch.gather({a.name}, {d}, {idx.name})", a.shape, FLOAT, (a, idx),
               distinct=False)
    else:
        if not (a.exact and a.distinct):
            return False
        k = b.rng.randint(1, n) if kind == "topk" else n
        shape = a.shape[:d] + (k,) + a.shape[d + 1:]
        expr = (f"torch.topk({a.name}, {k}, dim={d})" if kind == "topk"
                else f"torch.sort({a.name}, dim={d}, descending={b.chance(0.5)})")
        b.emit_many(expr, [dict(shape=shape, dtype=FLOAT, exact=True, distinct=False,
                                bound=a.bound),
                           dict(shape=shape, dtype=INT64, exact=True, distinct=False, bound=n,
                                lo=0, hi=n - 1)], (a,))
    return True


UNITS = {
    "mutate": (4, mutate),
    "unsupported": (1, unsupported),
}
