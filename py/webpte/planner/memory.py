"""Buffer assignment: activations share physical buffers when lifetimes do not overlap."""

from __future__ import annotations

from ..plan.model import BufferSpec

_POOLED = "activation"


def assign_buffers(vbufs, dispatches) -> tuple[list[BufferSpec], dict[int, int]]:
    """Map virtual buffers to physical ones.

    A pooled (activation) buffer lives from the first to the last dispatch that
    binds it; two pooled buffers may share memory when those ranges are disjoint.
    Everything else (constants, inputs, outputs, state, scalars) is dedicated.
    Returns the physical buffers and the virtual -> physical id map.
    """
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, d in enumerate(dispatches):
        for b in d.bindings:
            first.setdefault(b, i)
            last[b] = i
    out: list[BufferSpec] = []
    remap: dict[int, int] = {}
    for v in vbufs:
        if v.role != _POOLED:
            remap[v.id] = len(out)
            out.append(BufferSpec(len(out), v.size, v.role, v.label, v.init, sorted(v.values)))
    pooled = sorted((v for v in vbufs if v.role == _POOLED and v.id in first),
                    key=lambda v: (first[v.id], v.id))
    # Each slot: [physical id, busy-until dispatch index].
    slots: list[list[int]] = []
    for v in pooled:
        start = first[v.id]
        free = [s for s in slots if s[1] < start]
        fits = [s for s in free if out[s[0]].size >= v.size]
        if fits:
            slot = min(fits, key=lambda s: out[s[0]].size)
        elif free:
            slot = max(free, key=lambda s: out[s[0]].size)
            out[slot[0]].size = v.size
        else:
            slot = [len(out), -1]
            out.append(BufferSpec(len(out), v.size, _POOLED, f"pool{len(slots)}"))
            slots.append(slot)
        slot[1] = last[v.id]
        remap[v.id] = slot[0]
    for v in vbufs:
        if v.id not in remap:  # never bound by a dispatch: still give it memory
            remap[v.id] = len(out)
            out.append(BufferSpec(len(out), v.size, v.role, v.label, v.init))
    return out, remap
