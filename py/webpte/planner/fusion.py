"""Fusing chains of elementwise ops into one kernel (one dispatch, no intermediate buffers).

A group is a tree of elementwise ops (units with an `element` spec) from one run of
consecutive elementwise nodes, whose intermediate values are each used once, inside the
group, and are not method outputs. Every value made in a group has the root's element count
or is a scalar (one element, read at element 0); an external input may also broadcast
(numpy rules) to the output of the op reading it, and is read at the broadcast index (the
decoder's attention-sink blend of k and v with per-row weights and a constant row). The
fused kernel evaluates each op with
its own expression and compute type, and passes each intermediate through exactly the
conversion its storage would apply (store, then load), so results are bit-identical to
the unfused dispatches. Ops' runtime scalars (quantize's scale, zero point and range) go
into one params buffer of the group, binding `p`, never into the source: the same chain
in every layer is one pipeline whatever its scales.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kernels.common import Args
from ..kernels.element import Element
from ..kernels.elementwise.binary import broadcast_strides
from ..kernels.storage import PACKED, WGSL_TYPE, storage_of
from ..pte.graph import Graph, ValueList
from .share import arg_key, element_spec, prepacked

MAX_BINDINGS = 8  # WebGPU's default maxStorageBuffersPerShaderStage


@dataclass
class Group:
    """Nodes (chain indices, in order) fused into one dispatch at `at`.

    A group writes the value of each node in `roots`: its last node, or, for siblings merged
    into one multi-output group (`_merge_siblings`), each sibling's last node."""

    nodes: list[int]
    numel: int
    external: list[int] = field(default_factory=list)   # input value ids, first use order
    roots: list[int] = field(default_factory=list)
    head: int | None = None  # an rms_norm node (among `nodes`) whose output only the chain reads

    @property
    def chain(self) -> list[int]:
        """The elementwise nodes."""
        return [n for n in self.nodes if n != self.head]

    @property
    def root(self) -> int:
        return self.chain[-1]

    @property
    def outputs(self) -> list[int]:
        return self.roots or [self.root]

    @property
    def at(self) -> int:
        """The node whose place the dispatch takes: the first output's."""
        return self.outputs[0]


@dataclass(frozen=True)
class Uses:
    """How a method uses its values, counted once per plan for both fusion passes."""

    counts: dict[int, int]   # value id -> appearances among op args, plus 1 per method output
    io: frozenset[int]       # the method's inputs and outputs

    @classmethod
    def of(cls, graph: Graph, input_ids, output_ids) -> Uses:
        counts: dict[int, int] = {}
        for op in graph.chain:
            for vid in op.args:
                v = graph.values[vid]
                for u in (v.ids if isinstance(v, ValueList) else (vid,)):
                    counts[u] = counts.get(u, 0) + 1
        for vid in output_ids:
            counts[vid] = counts.get(vid, 0) + 1
        return cls(counts, frozenset(input_ids) | frozenset(output_ids))

    def passed_once(self, vid: int) -> bool:
        """Made by one node and read by exactly one other (ops name their outputs among
        their args), not a method input or output: a fused kernel may keep it in registers."""
        return self.counts.get(vid, 0) == 2 and vid not in self.io


def _element(graph: Graph, node: int) -> Element | None:
    """The op's element spec when it can take part in a group."""
    e = element_spec(graph, node)
    if e is None:
        return None
    out = graph.tensor(e.out)
    if not e.fusible or out.numel == 0 or not all(
            graph.tensor(v).numel in (1, out.numel) or _broadcasts(graph.tensor(v).dims, out.dims)
            for v in e.inputs):
        return None
    return e


def _broadcasts(dims, to) -> bool:
    """Whether `dims` broadcast to `to` (numpy rules) without growing it."""
    return len(dims) <= len(to) and all(x in (1, y) for x, y in zip(reversed(dims), reversed(to)))


def broadcast_index(dims, to) -> str:
    """WGSL index into a value of `dims` for flat element `i` of `to` it broadcasts to."""
    strides = broadcast_strides(dims, to)
    terms, inner = [], 1
    for d in range(len(to) - 1, -1, -1):
        if to[d] != 1 and strides[d]:
            coord = "i" if inner == 1 else f"(i / {inner}u)"
            if d > 0 and any(x != 1 for x in to[:d]):
                coord = f"{coord} % {to[d]}u"
            terms.append(coord if strides[d] == 1 else f"({coord}) * {strides[d]}u")
        inner *= to[d]
    return " + ".join(terms) or "0u"


def find_groups(graph: Graph, uses: Uses, exclude=frozenset(),
                unstable=frozenset()) -> tuple[dict[int, Group], dict[int, Element]]:
    """Groups of two or more nodes keyed by the node whose place their dispatch takes
    (`Group.at`), and the element specs of their nodes.

    Nodes in `exclude` (planned by another fusion) take part in no group. Values in
    `unstable` (state that ops write in place) are never read early by a merged sibling.
    """
    elements: dict[int, Element] = {}
    group_of: dict[int, Group] = {}        # producing node -> its open group
    producer: dict[int, int] = {}          # value id -> node, within the current run
    for node in range(len(graph.nodes)):
        e = None if node in exclude else _element(graph, node)
        if e is None:
            producer.clear()               # runs are consecutive elementwise nodes
            continue
        elements[node] = e
        g = Group([node], graph.tensor(e.out).numel, list(dict.fromkeys(e.inputs)))
        for vid in dict.fromkeys(e.inputs):
            p = producer.get(vid)
            if p is None or p not in group_of or not uses.passed_once(vid):
                continue
            h = group_of[p]
            if h.numel not in (1, g.numel):
                continue
            ext = list(dict.fromkeys([x for x in g.external if x != vid] + h.external))
            if len(ext) + 2 > MAX_BINDINGS:   # inputs, params, output
                continue
            g = Group(sorted(g.nodes + h.nodes), g.numel, ext)
            del group_of[p]
        producer[e.out] = node
        group_of[node] = g
    merged = _merge_siblings(graph, sorted(group_of.values(), key=lambda g: g.root),
                             elements, unstable)
    groups = {g.at: g for g in merged if len(g.nodes) > 1}
    for g in groups.values():
        _attach_norm(graph, g, uses, elements, exclude)
    return groups, elements


NORM = "et_vk.rms_norm.default"


def _attach_norm(graph: Graph, g: Group, uses: Uses, elements: dict[int, Element],
                 exclude) -> None:
    """Make an rms_norm the group's head when the group is the only reader of its output
    (the decoder's pass-1 quantize and pass-2 chain of the normed activation): one dispatch
    norms each row and runs the chain on it, the normed tensor never stored."""
    from ..kernels.reduce.rms_norm import chain_fits

    for vid in g.external:
        node = next((n for n in range(min(g.nodes) - 1, -1, -1)
                     if graph.node(n).args and graph.node(n).args[-1] == vid), None)
        if node is None or node in exclude or graph.node(node).name != NORM:
            continue
        op = graph.node(node)
        reads = sum(graph.node(n).args.count(vid) for n in g.nodes)
        packed = storage_of(graph.values[elements[g.root].out]) in PACKED
        rest = [v for v in g.external if v != vid]
        source = prepacked(graph)   # equal constants share one buffer
        # x, w, the other inputs, params and the outputs must fit the bindings.
        if (vid in uses.io or uses.counts.get(vid, 0) != reads + 1
                or graph.tensor(vid).numel != g.numel
                or 2 + len({arg_key(graph, source.get(v, v)) for v in rest}) + 1 + len(g.outputs)
                > MAX_BINDINGS
                or not chain_fits(Args(graph, f"{op.name} (node {node})"), op, packed)):
            continue
        g.head = node
        g.external = rest
        g.nodes = sorted(g.nodes + [node])
        return


def _merge_siblings(graph: Graph, found: list[Group], elements: dict[int, Element],
                    unstable) -> list[Group]:
    """Merge each group into an earlier one that reads the same value (the decoder's pass-1
    quantize and pass-2 error chain both read the normed activation), as one dispatch with
    an output per sibling at the earlier one's place.

    A later group joins when it reads a value the earlier group reads too, every other
    input it reads is a constant or made before the earlier group's place and not by it
    (the attention-sink blends of k, after rope, and of v, made by the linear before it,
    share their per-row weights), neither feeds the other, both have the same element count
    and packing (one invocation per element or per int8 word), no state value is read
    early, and the bindings fit."""
    def packed(g: Group) -> bool:
        return storage_of(graph.values[elements[g.root].out]) in PACKED

    source = prepacked(graph)
    made_at: dict[int, int] = {}   # value id -> the last node that writes it (its last arg)
    for n, op in enumerate(graph.nodes):
        if op.args:
            out = graph.values[op.args[-1]]
            # a multi-output op (split, max with indices) writes each tensor of its list
            for vid in (out.ids if isinstance(out, ValueList) else ()) + (op.args[-1],):
                made_at[vid] = n

    def buffers(vids) -> int:   # bindings they take: equal constants share one buffer
        return len({arg_key(graph, source.get(v, v)) for v in vids})

    def ready(vid: int, h: Group) -> bool:   # made before h's dispatch, not by h
        n = made_at.get(vid)
        return vid not in unstable and (n is None or (n < h.at and n not in h.nodes))

    out: list[Group] = []
    for g in found:
        target = None
        for h in out:
            shared = [v for v in g.external if v in h.external]
            # (a prepacked constant is made by its prepack's node: ready only after it)
            rest = [v for v in g.external if v not in h.external
                    and not graph.values[v].is_constant]
            if (shared and all(ready(v, h) for v in rest) and h.numel == g.numel
                    and packed(h) == packed(g)
                    and not any(v in unstable for v in shared)
                    and buffers(h.external + g.external) + 1 + len(h.outputs) + 1
                    <= MAX_BINDINGS):
                target = h
                break
        if target is None:
            out.append(g)
            continue
        target.roots = target.outputs + [g.root]
        target.nodes = target.nodes + g.nodes
        target.external = list(dict.fromkeys(target.external + g.external))
    return out


# -- the fused kernel --------------------------------------------------------------------

def chain_code(L, nodes: list[int], elements: dict[int, Element], external: list[int],
               register: dict[int, str], numel: int, at: int = 0) -> dict:
    """What `_elementwise.wgsl.j2`'s `chain` macro takes to evaluate `nodes` in registers.

    `register` maps values the kernel already holds (in stored form) to their names; the
    external inputs get bindings `a<j>`, one per buffer, read at element `i` (`numel`
    elements) or at 0 (scalars). `at` is the params word where the chain's runtime words
    start. Returns the bindings' buffers and WGSL types, the externals, the steps and the
    runtime words."""
    register = dict(register)
    bufs: list[int] = []
    wgsl: list[str] = []          # storage array type of each input binding
    externals = []
    # An external read at one index for every op: "i", "0u" (a scalar), or, broadcast, its
    # index in each reading op's output dims (one register per distinct index).
    reads: list[tuple[int, str]] = []
    for vid in external:
        n = L.tensor(vid).numel
        if n == numel or n == 1:
            reads.append((vid, "i" if n == numel else "0u"))
            continue
        for node in nodes:
            if vid in elements[node].inputs:
                index = broadcast_index(L.tensor(vid).dims, L.tensor(elements[node].out).dims)
                if (vid, index) not in reads:
                    reads.append((vid, index))
    for j, (vid, index) in enumerate(reads):
        b = L.buf(vid)
        if b not in bufs:
            bufs.append(b)
            wgsl.append(WGSL_TYPE[L.storage(vid)])
        register[vid if index in ("i", "0u") else (vid, index)] = f"e{j}"
        externals.append({"binding": f"a{bufs.index(b)}", "kind": L.storage(vid),
                          "index": index})

    def operand(vid: int, node: int) -> str:
        if vid in register:
            return register[vid]
        return register[(vid, broadcast_index(L.tensor(vid).dims,
                                              L.tensor(elements[node].out).dims))]

    steps = []
    words: list[float | int] = []  # runtime words, node order, then the opaque zero
    for j, node in enumerate(nodes):
        e = elements[node]
        steps.append({"element": e.spec(at=at + len(words)), "out_kind": L.storage(e.out),
                      "operands": [(operand(vid, node), L.storage(vid)) for vid in e.inputs],
                      "args": [f"x{j}_{k}" for k in range(len(e.inputs))]})
        register[e.out] = f"s{j}"
        words += e.runtime
    zero = at + len(words)
    words.append(0)
    # The kernel reads p when an op has runtime words or an f32 intermediate is made opaque.
    reads_params = zero > at or any(s["out_kind"] == "f32" for s in steps[:-1])
    return {"bufs": bufs, "wgsl": wgsl, "externals": externals, "steps": steps,
            "words": words, "zero": zero, "reads_params": reads_params}


def lower_group(L, group: Group, elements: dict[int, Element]) -> None:
    """One dispatch computing the group's output values from its external inputs.

    The kernel (shaders/fused_elementwise.wgsl.j2) holds every value in its stored form
    (what a store then a load gives), so each op sees exactly what its own kernel would
    read. Registers are named by position in the group, so that the same chain in every
    layer renders the same source (one pipeline)."""
    n = max(1, group.numel)
    nodes = group.chain
    register = {}
    if group.head is not None:   # the normed value, in its stored form, is register nv
        register[L.graph.node(group.head).args[-1]] = "nv"
    code = chain_code(L, nodes, elements, group.external, register, group.numel)
    bufs, words = code["bufs"], code["words"]
    outs = [elements[node].out for node in group.outputs]
    kinds = [L.storage(v) for v in outs]
    packed = kinds[0] in PACKED
    outputs = [{"binding": f"out{r}", "step": nodes.index(node), "kind": kind, "value": v,
                "decl": (f"out{r}", WGSL_TYPE[kind], "read_write")}
               for r, (node, kind, v) in enumerate(zip(group.outputs, kinds, outs))]
    ops = "+".join(elements[node].op for node in nodes)
    if group.head is not None:
        from ..kernels.reduce.rms_norm import lower_chain
        lower_chain(L, L.graph.node(group.head), code, outputs, "rms_norm+" + ops, packed)
        return
    wg, row = L.grid(-(-n // 4) if packed else n)
    k = L.kernel("fused/fused_elementwise", ops=ops, n=n,
                 inputs=[(f"a{j}", ty, "read") for j, ty in enumerate(code["wgsl"])]
                 + ([("p", "u32", "read")] if code["reads_params"] else []),
                 outputs=outputs, packed=packed, externals=code["externals"],
                 steps=code["steps"], zero=code["zero"], workgroup=256, row=row)
    bufs += [L.params(*words)] if code["reads_params"] else []
    L.dispatch(k, bufs + [L.buf(v) for v in outs], wg, label=f"fused:{ops}")
