"""Lowering a VK00 graph to a Plan: the builder that kernel units talk to."""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import PlanError, UnsupportedOpError
from ..kernels.common import Args, grid_1d
from ..kernels.registry import check_graph_args, missing_ops, registry, written_in_place
from ..kernels.render import render
from ..kernels.storage import WGSL_TYPE, constant_key, file_convert, storage_bytes, storage_of
from ..plan.interleave import check as interleave_check
from ..plan.interleave import interleaved_bytes
from ..plan.model import DispatchSpec, IOSpec, KernelSpec, Plan
from ..plan.validate import binding_access, conflicts, validate_plan
from ..pte.graph import Graph, OpCall, SymIntValue, TensorValue
from .fusion import lower_group
from .fusion_q8_lower import lower_dual_linear, lower_joined_linears, lower_paired_linears
from .memory import assign_buffers
from .passes import FusedCall, FusedGraph, PassContext, passes_for, run_passes
from .split import DEFAULT_BINDING

WORKGROUP = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup


def _word(v) -> int:
    """One 32-bit word: f32 bits of a float, two's complement of an int."""
    if isinstance(v, float):
        try:
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
        except OverflowError:
            raise PlanError(f"parameter {v!r} is beyond float32") from None
        if struct.unpack("<f", struct.pack("<I", bits))[0] != v and v == v:
            raise PlanError(f"parameter {v!r} is not exactly representable as f32")
        return bits
    v = int(v)
    if not -(1 << 31) <= v < (1 << 32):
        raise PlanError(f"parameter {v} does not fit 32 bits")
    return v & 0xFFFFFFFF


@dataclass
class VirtualBuffer:
    id: int
    size: int
    role: str
    label: str
    init: dict | None = None
    values: set[int] = field(default_factory=set)


class Lowering:
    """What a kernel unit sees while it lowers one op."""

    def __init__(self, graph: Graph, features: Iterable[str] = ()):
        self.graph = graph
        # WGSL language features the target device has (e.g. "packed_4x8_integer_dot_product").
        self.features: frozenset[str] = frozenset(features)
        self.args = Args(graph)
        self.vbufs: list[VirtualBuffer] = []
        self._of_value: dict[int, int] = {}
        self._constant_bufs: dict[tuple, int] = {}
        self.kernels: list[KernelSpec] = []
        self._kernel_ids: dict[str, int] = {}
        self.dispatches: list[DispatchSpec] = []
        self.op: OpCall | None = None
        self.node = -1

    # -- values ---------------------------------------------------------------
    def tensor(self, vid: int) -> TensorValue:
        return self.args.tensor(vid)

    def storage(self, vid: int) -> str:
        return storage_of(self.tensor(vid))

    def wgsl_type(self, vid: int) -> str:
        return WGSL_TYPE[self.storage(vid)]

    def buf(self, vid: int) -> int:
        """The (virtual) buffer holding value `vid`, made on first use."""
        if vid in self._of_value:
            return self._of_value[vid]
        v = self.graph.values[vid]
        if isinstance(v, SymIntValue):
            b = self._new(4, "scalar", f"symint{vid}", {"kind": "zeros"})
        elif isinstance(v, TensorValue) and v.is_constant:
            ref = self.graph.constants[v.constant_id]
            key = constant_key(self.graph, v)
            if key not in self._constant_bufs:
                init = ({"kind": "file", "offset": ref.offset, "nbytes": ref.nbytes,
                         "convert": file_convert(v, ref.nbytes)}
                        if ref.nbytes else {"kind": "zeros"})
                if ref.nbytes and ref.pieces > 1:   # a column block (planner/split.py)
                    if init["convert"] is not None:
                        raise PlanError(f"{self._where()}: constant {vid} is a column block "
                                        f"of {v.dtype.name} data, which needs converting")
                    init = {"kind": "file_parts",
                            "parts": [{"offset": o, "nbytes": n} for o, n in ref.ranges()]}
                if ref.nbytes and ref.file:   # an external data file's bytes (.ptd)
                    for part in init.get("parts", [init]):
                        part["file"] = ref.file
                self._constant_bufs[key] = self._new(storage_bytes(v), "constant",
                                                     f"const{v.constant_id}", init)
            b = self._constant_bufs[key]
        elif isinstance(v, TensorValue):
            b = self._new(storage_bytes(v), "activation", f"v{vid}")
        else:
            raise PlanError(f"{self._where()}: value {vid} ({type(v).__name__}) has no buffer")
        self._bind(vid, b)
        return b

    def joined_constant(self, items: list[tuple[int, int]], label: str,
                        interleave: dict | None = None) -> int:
        """One constant buffer holding, back to back, the first `nbytes` of each constant of
        `items` ((value id, nbytes)): a "file_parts" init of their file bytes (none
        converted), for kernels that run several ops' weights as one (planner/fusion_q8.py);
        with `interleave`, their rows regrouped (plan/interleave.py)."""
        parts = []
        for vid, nbytes in items:
            v = self.tensor(vid)
            ref = self.graph.constants[v.constant_id] if v.is_constant else None
            if (ref is None or ref.pieces != 1 or file_convert(v, ref.nbytes) is not None
                    or ref.nbytes != storage_bytes(v) or not 0 < nbytes <= ref.nbytes):
                raise PlanError(f"{self._where()}: value {vid} cannot join a constant buffer")
            parts.append({"offset": ref.offset, "nbytes": nbytes}
                         | ({"file": ref.file} if ref.file else {}))
        key = ("joined", tuple((p.get("file", 0), p["offset"], p["nbytes"]) for p in parts),
               tuple(sorted((interleave or {}).items())))
        if key not in self._constant_bufs:
            init = {"kind": "file_parts", "parts": parts}
            nbytes = sum(p["nbytes"] for p in parts)
            if interleave is not None:
                why = interleave_check(interleave, nbytes)
                if why:
                    raise PlanError(f"{self._where()}: {why}")
                init["interleave"] = dict(interleave)
                nbytes = interleaved_bytes(interleave)
            self._constant_bufs[key] = self._new(-(-nbytes // 4) * 4, "constant", label, init)
        return self._constant_bufs[key]

    def state_buf(self, vid: int) -> int:
        """A persistent buffer of its own for `vid` (KV caches): zero at load and reset."""
        if vid in self._of_value:
            b = self._of_value[vid]
            if self.vbufs[b].role != "state":
                raise PlanError(f"{self._where()}: value {vid} is already bound as "
                                f"{self.vbufs[b].role}")
            return b
        t = self.tensor(vid)
        b = self._new(storage_bytes(t), "state", f"state{vid}", {"kind": "zeros"})
        self._bind(vid, b)
        return b

    def alias(self, dst: int, src: int) -> bool:
        """Let `dst` share `src`'s buffer (pure copies of same-storage tensors).

        Returns False when aliasing is not allowed and the unit must copy.
        """
        if dst in self._of_value:
            return False
        s, d = self.tensor(src), self.tensor(dst)
        if storage_of(s) != storage_of(d) or storage_bytes(s) != storage_bytes(d):
            return False
        b = self.buf(src)
        if self.vbufs[b].role in ("state", "scalar"):
            return False
        self._bind(dst, b)
        return True

    def params(self, *values) -> int:
        """A small constant buffer of 32-bit words holding per-dispatch scalars.

        Kernels read scalars such as quantization scales from here instead of baking
        them in, so dispatches that differ only in those values share one pipeline.
        Floats are stored as f32 bits, ints (and bools) as i32.
        """
        words = [_word(v) for v in values]
        key = ("params", tuple(words))
        if key not in self._constant_bufs:
            self._constant_bufs[key] = self._new(4 * max(1, len(words)), "constant",
                                                 f"params{len(self._constant_bufs)}",
                                                 {"kind": "words", "words": words})
        return self._constant_bufs[key]

    def scratch(self, nbytes: int, label: str) -> int:
        return self._new(max(4, (nbytes + 3) // 4 * 4), "activation", label)

    def _new(self, size: int, role: str, label: str, init: dict | None = None) -> int:
        b = VirtualBuffer(len(self.vbufs), size, role, label, init)
        self.vbufs.append(b)
        return b.id

    def _bind(self, vid: int, b: int) -> None:
        self._of_value[vid] = b
        self.vbufs[b].values.add(vid)

    # -- kernels and dispatches ------------------------------------------------
    def kernel(self, template: str, **params) -> int:
        """Render a template; identical sources share one kernel (one pipeline)."""
        src = render(template, **params)
        if src not in self._kernel_ids:
            digest = hashlib.sha256(src.encode()).hexdigest()[:10]
            k = KernelSpec(len(self.kernels), f"{template.rsplit('/', 1)[-1]}_{digest}", src)
            self.kernels.append(k)
            self._kernel_ids[src] = k.id
        return self._kernel_ids[src]

    def dispatch(self, kernel: int, bindings: list[int], workgroups,
                 label: str | None = None, cost: dict | None = None) -> None:
        """Dispatch `kernel`; `label` names it in profiles (default: the op's name);
        `cost`: the work the unit counts, {"bytes_read", "macs"} (DispatchSpec.cost)."""
        wg = tuple(int(x) for x in workgroups) + (1,) * (3 - len(workgroups))
        if any(not 1 <= x <= 65535 for x in wg):
            raise PlanError(f"{self._where()}: workgroup counts {wg} outside 1..65535")
        if label is None:
            label = self.op.name if self.op else ""
        self.dispatches.append(DispatchSpec(kernel, list(bindings), wg, label, self.node,
                                            cost))

    def grid(self, n_threads: int, workgroup: int = WORKGROUP):
        return grid_1d(n_threads, workgroup)

    def unsupported(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self._where()}: {why}", [self.op.name] if self.op else [])

    def require_f32(self, what: str, vids) -> None:
        """UnsupportedOpError unless each value of `vids` is stored as float32."""
        for vid in vids:
            if self.storage(vid) != "f32":
                raise self.unsupported(f"{what} runs on float32 only, value {vid} is "
                                       f"{self.tensor(vid).dtype.name}")

    def _where(self) -> str:
        return f"{self.op.name} (node {self.node})" if self.op else "graph"


# Each fused kind's (planner/passes.py) `lower(L, op)`: one dispatch for the nodes it fused.
FUSED: dict[str, Callable] = {
    "elementwise": lambda L, op: lower_group(L, op.fused, op.elements),
    "dual_linear": lambda L, op: lower_dual_linear(L, op.fused),
    "paired_linears": lambda L, op: lower_paired_linears(L, op.fused),
    "joined_linears": lambda L, op: lower_joined_linears(L, op.fused),
}


def fused_graph(graph: Graph, input_ids, output_ids, state_ids=(), *,
                features: Iterable[str] = (), fuse: bool | str | None = None,
                limits: dict[str, int] | None = None, passes=None) -> FusedGraph:
    """`graph` after the passes (planner/passes.py) `fuse` runs for this target (or the
    list `passes`): what the lowering loop lowers, and what the interpreter runs (a fused
    node as its own nodes)."""
    missing = missing_ops(op.name for op in graph.chain)
    if missing:
        raise UnsupportedOpError(
            f"no kernel for {len(missing)} op(s): {', '.join(missing)}", missing)
    check_graph_args(graph)
    if fuse is None:
        fuse = os.environ.get("WEBPTE_FUSE", "1")
        fuse = fuse if fuse == "elementwise" else fuse != "0"
    # Values some op writes in place (OpUnit.mutates) are, to the passes, state: an op that
    # reads one before the write is neither shared with one that reads it after nor moved.
    state_ids = tuple(state_ids)
    state_ids += tuple(sorted(written_in_place(graph) - set(state_ids)))
    ctx = PassContext(tuple(input_ids), tuple(output_ids), state_ids,
                      frozenset(features),
                      (limits or {}).get("max_storage_buffer_binding_size", DEFAULT_BINDING))
    return run_passes(graph, ctx, passes_for(fuse) if passes is None else passes)


def lower(graph: Graph, *, method: str = "forward", input_ids: list[int] | None = None,
          output_ids: list[int] | None = None, input_dtypes: list[str] | None = None,
          output_dtypes: list[str] | None = None, max_context: int | None = None,
          features: Iterable[str] = (), fuse: bool | str | None = None,
          state_ids: Iterable[int] = (), limits: dict[str, int] | None = None,
          passes=None) -> Plan:
    """Lower `graph` to a Plan. Inputs/outputs default to the graph's own order.

    `state_ids`: values that persist across calls (mutable buffers such as KV caches that
    ops of the graph write): each gets a zero-initialised state buffer, is never fused away
    and no fused group that writes one reads it in the same dispatch.

    `features`: WGSL language features kernels may use (`L.features`); the default,
    none, gives kernels that every WebGPU implementation runs.
    `fuse`: which passes run (planner/passes.py): True every one, "elementwise" the
    elementwise fusion and those that are no fusion, False only those; None reads
    WEBPTE_FUSE the same way ("0" is False). `passes`: that list itself (tests).
    `limits`: the target's limits (WebGPU names, snake case); weights larger than its
    `max_storage_buffer_binding_size` (default: the specification's 128 MiB) are split
    (planner/split.py).
    """
    input_ids = list(graph.input_ids if input_ids is None else input_ids)
    output_ids = list(graph.output_ids if output_ids is None else output_ids)
    state_ids = list(state_ids)
    graph = fused_graph(graph, input_ids, output_ids, state_ids, features=features,
                        fuse=fuse, limits=limits, passes=passes)
    L = Lowering(graph, features)
    for vid in input_ids:
        L.vbufs[L.buf(vid)].role = "input"
    for vid in state_ids:
        L.state_buf(vid)
    reg = registry()
    for op, node in zip(graph.chain, graph.origin, strict=True):
        L.op, L.node = op, node
        L.args.op_name = f"{op.name} (node {node})"
        (FUSED[op.kind] if isinstance(op, FusedCall) else reg[op.name].lower)(L, op)
    L.op, L.node = None, -1
    separate_read_write(L)
    for vid in output_ids:
        b = L.buf(vid)
        if L.vbufs[b].role == "activation":
            L.vbufs[b].role = "output"

    def io(vids, dtypes):
        out = []
        for i, vid in enumerate(vids):
            t = L.tensor(vid)
            dtype = dtypes[i] if dtypes and dtypes[i] else t.dtype.numpy_name
            out.append(IOSpec(L.buf(vid), dtype, tuple(t.dims), storage_of(t)))
        return out

    inputs, outputs = io(input_ids, input_dtypes), io(output_ids, output_dtypes)
    buffers, remap = assign_buffers(L.vbufs, L.dispatches)
    for d in L.dispatches:
        d.bindings = [remap[b] for b in d.bindings]
    for spec in inputs + outputs:
        spec.buffer = remap[spec.buffer]
    limits = {
        "max_buffer_size": max((b.size for b in buffers), default=0),
        "max_storage_buffer_binding_size": max((b.size for b in buffers), default=0),
        "max_storage_buffers_per_shader_stage": max((len(d.bindings) for d in L.dispatches),
                                                    default=0),
    }
    plan = Plan(method=method, buffers=buffers, kernels=L.kernels, dispatches=L.dispatches,
                inputs=inputs, outputs=outputs,
                state=[b.id for b in buffers if b.role == "state"], limits=limits,
                max_context=max_context,
                features=sorted(f for f in L.features
                                if any(_uses(k.wgsl, f) for k in L.kernels)))
    validate_plan(plan)
    return plan


def separate_read_write(L: Lowering) -> None:
    """A dispatch that binds a buffer both read-only and writable (an op whose output is one
    of its inputs: state updated in place by a delegate lowered with alias_buffer_mutations)
    breaks WebGPU's usage-scope rule. It writes a copy of the buffer instead, which goes
    back after it: copy in (what it does not write keeps its bytes), run, copy out."""
    out: list[DispatchSpec] = []
    for d in L.dispatches:
        access = binding_access(L.kernels[d.kernel].wgsl)
        clash = sorted(conflicts(access, d.bindings))
        copies = []
        for b in clash:
            tmp = L.scratch(L.vbufs[b].size, f"{L.vbufs[b].label}_written")
            out.append(_copy_words(L, b, tmp, d))
            d.bindings = [tmp if x == b and a == "read_write" else x
                          for x, a in zip(d.bindings, access, strict=True)]
            copies.append(_copy_words(L, tmp, b, d))
        out += [d, *copies]
    L.dispatches = out


def _copy_words(L: Lowering, src: int, dst: int, d: DispatchSpec) -> DispatchSpec:
    words = L.vbufs[src].size // 4
    wg, row = grid_1d(words, WORKGROUP)
    k = L.kernel("layout/copy_words", n=words, workgroup=WORKGROUP, row=row)
    return DispatchSpec(k, [src, dst], wg, f"{d.op} (in-place copy)", d.node,
                        {"bytes_read": 4 * words, "macs": 0})


# Device features kernels may use, each known by a mark in the WGSL that uses it (WGSL
# language features are known by their `requires`).
DEVICE_FEATURES = {"subgroups": "@builtin(subgroup_"}


def _uses(wgsl: str, feature: str) -> bool:
    """Whether a kernel's WGSL uses the feature (plan.features lists those used)."""
    return f"requires {feature}" in wgsl or (feature in DEVICE_FEATURES
                                             and DEVICE_FEATURES[feature] in wgsl)
