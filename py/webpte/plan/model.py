"""The Plan: a serialisable description of buffers, kernels and dispatches.

Executors (wgpu-py natively, JS in the page) interpret a Plan and know nothing
about ops.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PLAN_VERSION = 1


@dataclass
class BufferSpec:
    """One GPU buffer. `init` says what it holds at load (and after reset for state)."""

    id: int
    size: int                      # bytes, a multiple of 4
    role: str                      # constant | activation | input | output | state | scalar
    label: str = ""
    # None (no initial content), {"kind": "zeros"},
    # {"kind": "file", "offset": int, "nbytes": int, "convert": None | "u8_to_u32" | "i64_to_i32",
    #  "file"?: int} (`file`: 0 or absent the .pte, k the k-th external data file, .ptd),
    # {"kind": "words", "words": [u32, ...]} (per-dispatch scalars, little endian),
    # {"kind": "file_parts", "parts": [{"offset", "nbytes", "file"?}, ...], "interleave"?: {...}}
    # (file ranges back to back; `interleave`: rows regrouped, plan.interleave)
    init: dict | None = None
    values: list[int] = field(default_factory=list)  # graph value ids held (dedicated buffers)


@dataclass
class KernelSpec:
    id: int
    name: str
    wgsl: str
    entry: str = "main"


@dataclass
class DispatchSpec:
    kernel: int
    bindings: list[int]            # buffer ids, binding i of group 0
    workgroups: tuple[int, int, int]
    op: str = ""                   # serialized op name, for errors and profiles
    node: int = -1                 # index of the op in the graph chain
    # Work its unit counted, for rooflines (webpte.roofline): {"bytes_read": int,
    # "macs": int (int8 multiply-adds)}; None: not counted. Executors ignore it.
    cost: dict | None = None


@dataclass
class ReadoutSpec:
    """A device-side readout of the logits (kernels/sampling/topk.py): the best `k` token
    ids, then their logits, in `buffer` after `dispatches` ran behind the plan's own; a call
    asking for it reads back only its first `read_bytes` instead of the outputs."""

    k: int
    dispatches: list[DispatchSpec]
    buffer: int
    read_bytes: int = 0            # 4 * k ids + 4 * k logits; 4 for k = 1 (the id only)

    def __post_init__(self):
        self.read_bytes = self.read_bytes or (4 if self.k == 1 else 8 * self.k)


@dataclass
class IOSpec:
    """A method input or output: host dtype/shape and how it sits on the GPU."""

    buffer: int
    dtype: str                     # numpy dtype the method takes or gives
    shape: tuple[int, ...]
    storage: str                   # f32 | i32 | i8 | u8 | bool (see plan.storage)
    name: str | None = None


@dataclass
class Plan:
    method: str
    buffers: list[BufferSpec]
    kernels: list[KernelSpec]
    dispatches: list[DispatchSpec]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    state: list[int] = field(default_factory=list)     # buffers zeroed by reset()
    limits: dict[str, int] = field(default_factory=dict)
    max_context: int | None = None                     # decoder: input_pos + rows bound
    # WGSL language features its kernels require, and device features ("subgroups")
    features: list[str] = field(default_factory=list)
    readouts: list[ReadoutSpec] = field(default_factory=list)  # decoders: argmax / top-k
    version: int = PLAN_VERSION

    def memory(self) -> dict[str, int]:
        """Bytes of device memory by role."""
        out: dict[str, int] = {}
        for b in self.buffers:
            out[b.role] = out.get(b.role, 0) + b.size
        out["total"] = sum(b.size for b in self.buffers)
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> Plan:
        """The Plan of a `to_json()` text, every field checked (PlanError when malformed)."""
        from .plan_json import plan_from_json

        return plan_from_json(text)
