"""ExecuTorch's memory model made explicit: planned tensors that share memory share values.

ExecuTorch's memory planner places every non-constant tensor of a method at a byte range
(`memory_id`, offset, size) of an arena. Two tensors at overlapping ranges are the same bytes:
a view (`x.view(...)` exported without a partitioner becomes a tensor at its base's range and
no instruction at all), an output placed in a slot an earlier value left, an `out=` argument
that is also an input. webpte's graph is a graph of values, so this pass replays the method's
instructions over the arenas and rewrites the chain so that value semantics give the
runtime's bytes:

* a tensor read while the bytes of its range were last written as another tensor of the same
  range becomes a `view_copy` of that tensor (a reshape: no copy on the device);
* a method output whose range was last written as another tensor, likewise;
* a read whose range was last written by tensors of other ranges (a partial overlap) is
  refused by name: webpte does not reinterpret part of a buffer.

Tensors of no bytes (empty tensors) occupy nothing. Tensors never written before they are read
keep their value: a mutable buffer (state), found later by `method.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedOpError
from ..pte.graph import OpCall, TensorValue, ValueList

_VIEW = "aten.view_copy.default"


@dataclass(frozen=True)
class Slot:
    """Where a planned tensor lives: `nbytes` bytes at `offset` of memory `mem_id`."""

    mem_id: int
    offset: int
    nbytes: int

    def overlaps(self, other: Slot) -> bool:
        return (self.mem_id == other.mem_id and self.offset < other.offset + other.nbytes
                and other.offset < self.offset + self.nbytes)


@dataclass
class _Write:
    vid: int
    slot: Slot
    seq: int


class _Arenas:
    """The writes that currently hold each arena's bytes (latest first wins)."""

    def __init__(self) -> None:
        self.live: list[_Write] = []
        self.seq = 0

    def write(self, vid: int, slot: Slot) -> None:
        self.live = [w for w in self.live if not w.slot.overlaps(slot)]
        self.seq += 1
        self.live.append(_Write(vid, slot, self.seq))

    def holders(self, slot: Slot) -> list[_Write]:
        return [w for w in self.live if w.slot.overlaps(slot)]


def resolve_aliases(values: list, chain: list[OpCall], input_ids: list[int],
                    output_ids: list[int], slots: dict[int, Slot],
                    method: str = "forward") -> tuple[list[OpCall], list[int]]:
    """The chain and outputs rewritten so that tensors sharing planned memory share values
    (see the module docstring). `values` is extended with the views' values."""
    arenas = _Arenas()
    views: dict[tuple[int, int], int] = {}  # (tensor, holder's write seq) -> its view value
    out_chain: list[OpCall] = []

    def slot_of(vid: int) -> Slot | None:
        s = slots.get(vid)
        return s if s is not None and s.nbytes > 0 else None

    def tensors(vid: int) -> tuple[int, ...]:
        v = values[vid] if 0 <= vid < len(values) else None
        if isinstance(v, ValueList):
            return v.ids
        return (vid,) if isinstance(v, TensorValue) else ()

    def resolve(vid: int, user: str) -> int:
        """The value to read for `vid` now: itself, or a view of the tensor holding its bytes."""
        slot = slot_of(vid)
        if slot is None:
            return vid
        held = arenas.holders(slot)
        if not held or (len(held) == 1 and held[0].vid == vid):
            return vid
        if len(held) == 1 and held[0].slot == slot:
            w = held[0]
            key = (vid, w.seq)
            if key not in views:
                views[key] = _view(values, out_chain, w.vid, vid, method)
            return views[key]
        names = ", ".join(f"value {w.vid} at {w.slot.offset}+{w.slot.nbytes}" for w in held)
        raise UnsupportedOpError(
            f"{method}: {user} reads value {vid} (memory {slot.mem_id} at "
            f"{slot.offset}+{slot.nbytes}) whose bytes were last written as {names}; webpte "
            "shares planned memory between tensors of the same byte range only",
            ops=[user])

    def resolve_arg(vid: int, user: str) -> int:
        v = values[vid] if 0 <= vid < len(values) else None
        if isinstance(v, ValueList):
            ids = tuple(resolve(i, user) for i in v.ids)
            if ids == v.ids:
                return vid
            values.append(ValueList(ids))
            return len(values) - 1
        if isinstance(v, TensorValue):
            return resolve(vid, user)
        return vid

    for vid in input_ids:
        for t in tensors(vid):
            if (s := slot_of(t)) is not None:
                arenas.write(t, s)
    for op in chain:
        if not op.args:
            out_chain.append(op)
            continue
        *ins, out = op.args
        # A multi-output kernel's own form passes its out tensors before their list: written,
        # not read.
        outs = set(tensors(out))
        new_ins = [a if a in outs else resolve_arg(a, op.name) for a in ins]
        out_chain.append(OpCall(op.name, (*new_ins, out), op.node_id)
                         if new_ins != ins else op)
        for t in tensors(out):
            if (s := slot_of(t)) is not None:
                arenas.write(t, s)
    outputs = [resolve(o, "the method's output") if isinstance(values[o], TensorValue) else o
               for o in output_ids]
    for i, op in enumerate(out_chain):
        out_chain[i] = OpCall(op.name, op.args, i)
    return out_chain, outputs


def _view(values: list, chain: list[OpCall], src: int, like: int, method: str) -> int:
    """Append `view_copy(src) -> new value shaped like `like`` to the chain; the new value."""
    s, t = values[src], values[like]
    if s.dtype != t.dtype:
        raise UnsupportedOpError(
            f"{method}: value {like} ({t.dtype.name}) shares planned memory with value {src} "
            f"({s.dtype.name}); webpte does not reinterpret one dtype as another",
            ops=["memory aliasing"])
    values.append(tuple(t.dims))
    dims = len(values) - 1
    values.append(TensorValue(t.dtype, t.dims))
    new = len(values) - 1
    chain.append(OpCall(_VIEW, (src, dims, new), len(chain)))
    return new
