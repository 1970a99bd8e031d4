"""Argmax and top-k candidates of a plan's logits, computed on the device.

Appended to a decoder's plan as readouts (Plan.readouts): each is a few passes of one
kernel, every pass keeping the best `k` of each run of `CHUNK` entries until one run is
left. Two variants, picked by a planner hint (TOPK_HINT; planner/hints.py):
- "lanes" (`shaders/sampling/topk.wgsl.j2`, CPU adapters): a run per lane, kept in a
  private sorted list by insertion, no barriers (a workgroup barrier costs a switch of every
  invocation on CPU adapters; a bitonic sort of 1024 entries per workgroup took 100 ms for
  49,152 logits on lavapipe);
- "bitonic" (`topk_bitonic.wgsl.j2`, GPUs): a run per workgroup of 256 lanes, sorted in
  workgroup memory by a bitonic network (SmolLM2's 49,152 logits: 48 workgroups of 256
  lanes, not 48 lanes).
The order is the host sampler's: larger logit first, equal logits by lower token id,
so the ids are exactly the ones `Sampler` picks from the full row.

The last pass writes `k` token ids (u32) then their `k` logits (f32); a greedy step reads
back only the first id (4 bytes), a top-k step the 8k bytes.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from ...plan.model import BufferSpec, DispatchSpec, KernelSpec, Plan, ReadoutSpec
from .._np import np
from ..common import hinted_variant
from ..render import render

CHUNK = 1024         # entries per run (a lane's or a workgroup's), at most
# llvmpipe ends every loop of an invocation once its loops ran 65,535 iterations in all,
# silently (attention/_tiled.py): a lane's run keeps its insertion loops under that.
LOOP_BUDGET = 65535
CANDIDATES = 64      # the top-k readout's k: the largest top_k sampled on the device
READOUT_KS = (1, CANDIDATES)
# Variants as data: template, workgroup size, whether a workgroup (else a lane) takes a run.
TOPK_VARIANTS = {"lanes": {"template": "sampling/topk", "workgroup": 64, "per_group": False},
                 "bitonic": {"template": "sampling/topk_bitonic", "workgroup": 256,
                             "per_group": True}}
TOPK_HINT = "topk:"  # a planner hint ("topk:bitonic"); without one, "lanes"


def topk_variant(features) -> str:
    """The readout variant the features ask for (the last hint wins)."""
    return hinted_variant(features, TOPK_HINT, TOPK_VARIANTS, "lanes", "top-k")


def lane_chunk(k: int) -> int:
    """Entries per lane's run of the "lanes" variant: the largest power of two up to CHUNK
    whose worst case (every entry inserted at the front: k + 1 iterations each, plus the
    list's fill and write) stays within LOOP_BUDGET. k = 64: 512; k = 1: 1024."""
    chunk = CHUNK
    while chunk > 2 * k and chunk * (k + 1) + 2 * k > LOOP_BUDGET:
        chunk //= 2
    return chunk


def passes(n: int, k: int, chunk: int = CHUNK) -> list[tuple[int, int]]:
    """(entries in, lanes) of each pass that takes `n` logits down to the best `k`, each
    lane (or workgroup) keeping the best k of its run of `chunk`."""
    if not 1 <= k <= chunk // 2:
        raise PlanError(f"a readout keeps 1..{chunk // 2} candidates, not {k}")
    out = []
    while True:
        lanes = math.ceil(n / chunk)
        out.append((n, lanes))
        if lanes == 1:
            return out
        n = lanes * k


def add_readouts(plan: Plan, ks=READOUT_KS, features=()) -> Plan:
    """`plan` with one readout per k in `ks` over the last row of its first output (float32
    logits `[..., vocab]`), in the variant `features` ask for (TOPK_HINT). Its buffers,
    kernels and dispatches are appended; the plan's own dispatches are unchanged (a call
    runs a readout only when asked)."""
    name = topk_variant(features)
    variant = TOPK_VARIANTS[name]
    logits = plan.outputs[0]
    if logits.dtype != "float32" or logits.storage != "f32" or not logits.shape:
        raise PlanError(f"readouts need float32 logits, output 0 is {logits.dtype}"
                        f"{list(logits.shape)}")
    vocab = int(logits.shape[-1])
    offset = math.prod(int(d) for d in logits.shape) - vocab   # the last row
    kernels: dict[str, int] = {}
    for k in ks:
        k = min(k, vocab)
        src, dispatches = logits.buffer, []
        chunk = lane_chunk(k) if name == "lanes" else CHUNK
        steps = passes(vocab, k, chunk)
        for i, (n, lanes) in enumerate(steps):
            final = i == len(steps) - 1
            wgsl = render(variant["template"], k=k, n=n, chunk=chunk, lanes=lanes,
                          workgroup=variant["workgroup"], offset=offset,
                          source="logits" if i == 0 else "pairs", final=final)
            if wgsl not in kernels:
                kernels[wgsl] = len(plan.kernels)
                plan.kernels.append(KernelSpec(len(plan.kernels), f"topk{k}_{len(plan.kernels)}",
                                               wgsl))
            dst = len(plan.buffers)
            plan.buffers.append(BufferSpec(dst, 4 * (2 * k if final else 2 * lanes * k),
                                           "activation", f"readout top{k} pass {i}"))
            cost = {"bytes_read": 4 * n * (1 if i == 0 else 2), "macs": 0}
            groups = lanes if variant["per_group"] else math.ceil(lanes / variant["workgroup"])
            dispatches.append(DispatchSpec(kernels[wgsl], [src, dst], (groups, 1, 1),
                                           f"readout.top{k}", -1, cost))
            src = dst
        plan.readouts.append(ReadoutSpec(k, dispatches, src))
    return plan


def reference(logits, k: int):
    """numpy: (ids, logits) of the best `k` of the last row, in the kernel's order."""
    row = np.asarray(logits, np.float32).reshape(-1, np.shape(logits)[-1])[-1]
    bits = row.view(np.uint32).astype(np.int64)
    keys = np.where(bits >= 0x80000000, 0xFFFFFFFF - bits, bits | 0x80000000)
    keys = np.where(bits == 0x80000000, 0x80000000, keys)
    keys = np.where(np.isnan(row), 0, keys)
    order = np.lexsort((np.arange(row.size), -keys))[:k]
    return order.astype(np.int64), np.where(row[order] == 0, np.float32(0), row[order])


def readout_words(logits, k: int):
    """numpy: the uint32 words the readout of `k` leaves (ids, then logits; the id alone
    for k = 1), for executors that have no device readout (the numpy interpreter)."""
    ids, values = reference(logits, k)
    if k == 1:
        return ids[:1].astype(np.uint32)
    return np.concatenate([ids.astype(np.uint32), values.astype(np.float32).view(np.uint32)])
