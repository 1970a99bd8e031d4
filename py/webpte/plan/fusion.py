"""Fusing chains of elementwise ops into one kernel (one dispatch, no intermediate buffers).

A group is a tree of elementwise ops (units with an `element` spec) from one run of
consecutive elementwise nodes, whose intermediate values are each used once, inside the
group, and are not method outputs. Every value in a group has the root's element count
or is a scalar (one element, read at element 0). The fused kernel evaluates each op with
its own expression and compute type, and passes each intermediate through exactly the
conversion its storage would apply (store, then load), so results are bit-identical to
the unfused dispatches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PlanError, UnsupportedOpError
from ..kernels.common import Args
from ..kernels.elementwise import Element
from ..kernels.registry import registry
from ..pte.graph import Graph, ValueList
from .storage import PACKED, WGSL_TYPE

MAX_BINDINGS = 8  # WebGPU's default maxStorageBuffersPerShaderStage


@dataclass
class Group:
    """Nodes (chain indices, in order) fused into one dispatch at the root, the last."""

    nodes: list[int]
    numel: int
    external: list[int] = field(default_factory=list)   # input value ids, first use order

    @property
    def root(self) -> int:
        return self.nodes[-1]


def _uses(graph: Graph, output_ids) -> dict[int, int]:
    uses: dict[int, int] = {}
    for op in graph.chain:
        for vid in op.args:
            v = graph.values[vid]
            for u in (v.ids if isinstance(v, ValueList) else (vid,)):
                uses[u] = uses.get(u, 0) + 1
    for vid in output_ids:
        uses[vid] = uses.get(vid, 0) + 1
    return uses


def _element(graph: Graph, node: int) -> Element | None:
    """The op's element spec when it can take part in a group."""
    op = graph.chain[node]
    unit = registry().get(op.name)
    if unit is None or unit.element is None:
        return None
    try:
        e = unit.element(Args(graph, f"{op.name} (node {node})"), op)
    except (UnsupportedOpError, PlanError):
        return None   # its own lowering reports why
    n = graph.tensor(e.out).numel
    if not e.fusible or n == 0 or any(graph.tensor(v).numel not in (1, n) for v in e.inputs):
        return None
    return e


def find_groups(graph: Graph, input_ids, output_ids,
                exclude=frozenset()) -> tuple[dict[int, Group], dict[int, Element]]:
    """Groups of two or more nodes keyed by root node, and the element specs of their nodes.

    Nodes in `exclude` (planned by another fusion) take part in no group.
    """
    uses = _uses(graph, output_ids)
    io = set(input_ids) | set(output_ids)
    elements: dict[int, Element] = {}
    group_of: dict[int, Group] = {}        # producing node -> its open group
    producer: dict[int, int] = {}          # value id -> node, within the current run
    for node in range(len(graph.chain)):
        e = None if node in exclude else _element(graph, node)
        if e is None:
            producer.clear()               # runs are consecutive elementwise nodes
            continue
        elements[node] = e
        g = Group([node], graph.tensor(e.out).numel, list(dict.fromkeys(e.inputs)))
        for vid in dict.fromkeys(e.inputs):
            p = producer.get(vid)
            # Ops name their outputs among their args: 2 is the producer and this node.
            if p is None or p not in group_of or uses.get(vid, 0) != 2 or vid in io:
                continue
            h = group_of[p]
            if h.numel not in (1, g.numel):
                continue
            ext = list(dict.fromkeys([x for x in g.external if x != vid] + h.external))
            if len(ext) + 1 > MAX_BINDINGS:
                continue
            g = Group(sorted(g.nodes + h.nodes), g.numel, ext)
            del group_of[p]
        producer[e.out] = node
        group_of[node] = g
    groups = {g.root: g for g in group_of.values() if len(g.nodes) > 1}
    return groups, elements


# -- the fused kernel --------------------------------------------------------------------

def _stored_load(buf: str, kind: str, index: str) -> str:
    """Element `index` of a storage array, as held in registers by `_load_as`."""
    if kind == "i8":
        return f"extractBits(bitcast<i32>({buf}[({index}) >> 2u]), (({index}) & 3u) * 8u, 8u)"
    if kind == "u8":
        return f"i32(extractBits({buf}[({index}) >> 2u], (({index}) & 3u) * 8u, 8u))"
    return f"{buf}[{index}]"


def _store(kind: str, v: str) -> str:
    """A computed value as its storage kind would hold it (i8/u8 as the sign/zero-extended
    low byte that a packed store then load gives)."""
    if kind == "bool":
        return f"select(0u, 1u, bool({v}))"
    if kind == "f32":
        return f"f32({v})"
    if kind == "i8":
        return f"extractBits(i32({v}), 0u, 8u)"
    if kind == "u8":
        return f"i32(extractBits(bitcast<u32>(i32({v})), 0u, 8u))"
    return f"i32({v})"


def _load_as(kind: str, s: str, ty: str) -> str:
    """A stored value read as compute type `ty`, as `_common.load` converts it."""
    if kind == "bool":
        return f"select(0.0, 1.0, {s} != 0u)" if ty == "f32" else f"{ty}({s} != 0u)"
    return f"{ty}({s})"


def lower_group(L, group: Group, elements: dict[int, Element]) -> None:
    """One dispatch computing the group's root value from its external inputs."""
    n = max(1, group.numel)
    bufs: list[int] = []
    wgsl: list[str] = []          # storage array type of each input binding
    names: dict[int, str] = {}    # value id -> register holding its stored form
    lines: list[str] = []
    # Registers are named by position in the group, so that the same chain in every
    # layer renders the same source (one pipeline).
    for j, vid in enumerate(group.external):
        b = L.buf(vid)
        if b not in bufs:
            bufs.append(b)
            wgsl.append(WGSL_TYPE[L.storage(vid)])
        names[vid] = f"e{j}"
        index = "i" if L.tensor(vid).numel == group.numel else "0u"
        lines.append(f"let e{j} = {_stored_load(f'a{bufs.index(b)}', L.storage(vid), index)};")
    root = elements[group.root]
    for j, node in enumerate(group.nodes):
        e = elements[node]
        operands = []
        for k, vid in enumerate(e.inputs):
            lines.append(f"let x{j}_{k} = {_load_as(L.storage(vid), names[vid], e.ty)};")
            operands.append(f"x{j}_{k}")
        lines.append(f"let v{j}: {e.ty} = {e.expr(*operands)};")
        if node != group.root:
            lines.append(f"let s{j} = {_store(L.storage(e.out), f'v{j}')};")
            names[e.out] = f"s{j}"
    out_kind = L.storage(root.out)
    packed = out_kind in PACKED
    wg, row = L.grid(-(-n // 4) if packed else n)
    ops = "+".join(elements[node].op for node in group.nodes)
    k = L.kernel("fused_elementwise", ops=ops, n=n,
                 inputs=[(f"a{j}", ty, "read") for j, ty in enumerate(wgsl)],
                 out_kind=out_kind, out_wgsl=WGSL_TYPE[out_kind], out_packed=packed,
                 ty=root.ty, lines=lines, result=f"v{len(group.nodes) - 1}", workgroup=256, row=row)
    L.dispatch(k, bufs + [L.buf(root.out)], wg, label=f"fused:{ops}")

