"""Fusing the two passes of a two-pass int8 linear into one kernel that reads W once.

The decoder recipe (tools/decoder_model.py, TwoPassQ8Linear) computes
    y = linear_q8(q8(x; s1, z1), W) + linear_q8(q8(x - fq8(x); s2, z2), W)
with one int8 W: two `linear_q8ta_q8csw` calls on the same weight, sums and scales, whose
outputs meet in one `aten.add.Tensor`. A pair is fused when both outputs are used only
by that add (and are not method outputs), which also means neither linear's input can
depend on the other's output. The dispatch takes the add's place in the chain; the two
linears plan nothing. Each accumulator is dequantized exactly as linear_q8_skinny does,
then combined with the add's own element expression, so the result is bit-identical to
the three separate dispatches.

Covered: int8 inputs; up to SKINNY_ROWS rows (decoder windows) one column per invocation,
more rows (the vision tower) in workgroup tiles (linear_q8_dual_tiled: each staged W word
serves both passes). Float inputs (in-kernel quantization) and pairs with two different bias
constants stay unfused.

Epilogue: when the nodes after the add are elementwise ops on the sum (the decoder's
residual add, the MLP's silu), and every value but the last is read by those nodes alone,
they run in the dual kernel after the add, as a fused elementwise group would
(`_elementwise.wgsl.j2`'s `chain`), and the dispatch moves to the chain's root. The
chain's other inputs have the sum's element count (read at the same flat index) or one
element; they take the bindings left under MAX_BINDINGS, and the chain stops before an op
that would need more, or whose result is packed int8 (one invocation per column cannot
write whole words).

Tail: the packed group that alone reads a paired dispatch's result (the down projection's
two-pass quantize of silu(gate) * up) runs in the skinny paired kernel after its chain, on the
4 columns each invocation holds, so it writes whole int8 words; its scalar constants share one
buffer (`Tail`, `attach_tails`).

Ordering with the elementwise pass (fusion.py): pairs are found first, and their adds and
epilogues are withheld from elementwise groups (they break a run); everything else groups
as before, including the chains that produce the second pass's input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PlanError, UnsupportedOpError
from ..kernels.common import Args
from ..kernels.element import Element
from ..kernels.elementwise.binary import element as add_element
from ..kernels.quantized.linear_q8 import (
    DECODE_VARIANTS,
    SKINNY_ROWS,
    decode_variant,
)
from ..kernels.quantized.linear_q8 import NAME as LINEAR
from ..kernels.storage import (
    PACKED,
    constant_key,
    file_convert,
    storage_bytes,
    storage_of,
)
from ..pte.graph import Graph, TensorValue
from .fusion import MAX_BINDINGS, Group, Uses, _element
from .share import prepacked

ADD = "aten.add.Tensor"


@dataclass(frozen=True)
class DualLinear:
    """Two linear nodes sharing W, in the add's operand order, fused at the add node."""

    linears: tuple[int, int]
    add: int
    m: int
    n: int
    k: int
    add_element: dict  # the add's element spec (shaders/_elementwise.wgsl.j2)
    epilogue: dict[int, Element] = field(default_factory=dict)  # chain nodes after the add
    epilogue_inputs: tuple[int, ...] = ()   # the chain's values other than its own

    @property
    def root(self) -> int:
        """The node whose value the dispatch writes, where it takes its place."""
        return max(self.epilogue, default=self.add)


@dataclass(frozen=True)
class JoinedLinears:
    """Dual linears on the same two int8 inputs (an attention block's q, k and v) run as one
    decode dispatch: their W rows back to back in one constant buffer, their per-column
    sums and scales in another, each pair's output in its own binding. The dispatch takes
    the first pair's place; the others plan nothing."""

    pairs: tuple[DualLinear, ...]   # in chain order

    @property
    def root(self) -> int:
        return self.pairs[0].root

    @property
    def n(self) -> int:
        return sum(p.n for p in self.pairs)


@dataclass(frozen=True)
class Tail:
    """An elementwise group with int8 outputs that reads the paired result and scalar file
    constants alone (the decoder's quantize of silu(gate) * up for the down projection, both
    passes): the paired dispatch evaluates it on the 4 columns an invocation holds and writes
    whole int8 words, the f32 result never stored. The group plans nothing."""

    group: Group
    consts: tuple[int, ...]   # the scalar constants it reads, a word each in one buffer


@dataclass(frozen=True)
class PairedLinears:
    """Two dual linears on the same two int8 inputs and shape where the second's epilogue
    reads the first's result and nothing else does (the MLP's silu(gate) * up): one decode
    dispatch whose invocations compute the same columns of both, the first's result held in
    registers for the second's chain. It takes the second's place; the first plans nothing."""

    first: DualLinear
    second: DualLinear
    tail: Tail | None = None

    @property
    def root(self) -> int:
        return self.second.root


# x, x, w, per-column words, p: the outputs take the bindings left.
JOIN_MAX = MAX_BINDINGS - 5
# A planner hint: "q8_join:off" plans every dual linear alone (bench comparisons).
JOIN_HINT = "q8_join:"


def _buffer_key(graph: Graph, vid: int):
    """Values with equal keys share one buffer in the plan (a constant under different value
    ids: Lowering.buf's `constant_key`)."""
    v = graph.values[vid]
    if isinstance(v, TensorValue) and v.is_constant:
        return ("const", *constant_key(graph, v))
    return ("value", vid)


def _linear_shape(graph: Graph, call) -> tuple[int, int, int] | None:
    """(M, N, K) of a linear the dual kernel can run; None otherwise."""
    if len(call.args) != 8:
        return None
    x, _s, zp, w, sums, scales, bias, out = call.args
    tx, tw, to = (graph.values[v] for v in (x, w, out))
    if not all(isinstance(t, TensorValue) for t in (tx, tw, to)) or len(tw.dims) != 2:
        return None
    n, k = tw.dims
    if (not tx.dims or tx.dims[-1] != k or tuple(to.dims) != (*tx.dims[:-1], n) or k % 4
            or k == 0 or storage_of(tx) != "i8" or storage_of(tw) != "i8"
            or storage_of(to) != "f32"):
        return None
    m = tx.numel // k
    try:
        zero_point = Args(graph).int(zp)
    except PlanError:
        return None
    if m <= 0 or not -256 <= zero_point <= 255:
        return None
    for vid, kind in ((sums, "i32"), (scales, "f32")) + (
            ((bias, "f32"),) if graph.values[bias] is not None else ()):
        t = graph.values[vid]
        if not isinstance(t, TensorValue) or storage_of(t) != kind or t.numel < n:
            return None
    return m, n, k


def _epilogue(graph: Graph, add: int, numel: int, uses: Uses,
              room: int) -> tuple[dict[int, Element], tuple[int, ...]]:
    """The elementwise nodes after the add that the dual kernel can evaluate, and their
    other inputs: consecutive nodes, each reading a value the kernel holds (the sum or an
    earlier node's); the longest such run whose held values, all but the last, are read by
    the run alone (silu: x * sigmoid(x) reads the sum twice)."""
    chain: dict[int, Element] = {}
    external: list[int] = []
    made = {graph.node(add).args[-1]: add}   # held value -> the node that makes it
    best: tuple[dict[int, Element], tuple[int, ...]] = ({}, ())
    for node in range(add + 1, len(graph.nodes)):
        e = _element(graph, node)
        if (e is None or not any(v in made for v in e.inputs)
                or graph.tensor(e.out).numel != numel
                or storage_of(graph.values[e.out]) in PACKED):
            break
        ext = list(dict.fromkeys(external + [v for v in e.inputs if v not in made]))
        if len(ext) > room:
            break
        chain[node], external, made[e.out] = e, ext, node
        if all(_read_within(graph, uses, v, [add, *chain]) for v in made if v != e.out):
            best = (dict(chain), tuple(external))
    return best


def _read_within(graph: Graph, uses: Uses, vid: int, nodes: list[int]) -> bool:
    """Whether every appearance of `vid` (its maker's out arg included) is among `nodes`'
    args, and it is no method input or output: the kernel may keep it in registers."""
    return vid not in uses.io and uses.counts.get(vid, 0) == sum(
        graph.node(n).args.count(vid) for n in nodes)


def find_dual_linears(graph: Graph, uses: Uses) -> dict[int, DualLinear]:
    """Fusable pairs keyed by their root node (the add, or its epilogue's last node)."""
    producer = {op.args[-1]: node for node, op in enumerate(graph.nodes) if op.name == LINEAR}
    pairs: dict[int, DualLinear] = {}
    for node, op in enumerate(graph.nodes):
        if op.name != ADD or len(op.args) != 4:
            continue
        a, b = op.args[0], op.args[1]
        nodes = (producer.get(a), producer.get(b))
        if a == b or None in nodes or not (uses.passed_once(a) and uses.passed_once(b)):
            continue
        calls = [graph.node(n) for n in nodes]
        shapes = [_linear_shape(graph, c) for c in calls]
        if None in shapes or shapes[0] != shapes[1]:
            continue
        if any(_buffer_key(graph, calls[0].args[i]) != _buffer_key(graph, calls[1].args[i])
               for i in (3, 4, 5)):
            continue   # not the same weight
        biases = {_buffer_key(graph, c.args[6]) for c in calls
                  if graph.values[c.args[6]] is not None}
        if len(biases) > 1:
            continue   # two bias bindings would exceed MAX_BINDINGS
        t_out = graph.values[op.args[3]]
        if storage_of(t_out) != "f32" or tuple(t_out.dims) != tuple(graph.values[a].dims):
            continue
        try:
            e = add_element(Args(graph, f"{op.name} (node {node})"), op)
        except (UnsupportedOpError, PlanError):
            continue
        m, n, k = shapes[0]
        room = MAX_BINDINGS - (5 + len(biases) + 2)   # x, x, w, sums, scales, bias; p, out
        pair = DualLinear(nodes, node, m, n, k, e.spec(),
                          *_epilogue(graph, node, m * n, uses, room))
        pairs[pair.root] = pair
    return pairs


CLONE = "aten.clone.default"


def clones_of(graph: Graph, producer: dict[int, int], vid: int) -> list[int]:
    """The clone nodes `vid` is made by, through clones of the same dims (their lowering
    shares the buffer), outermost first: the recipe clones the one quantized activation
    once per projection."""
    nodes = []
    while vid in producer and graph.node(producer[vid]).name == CLONE:
        src = graph.node(producer[vid]).args[0]
        if graph.values[src].dims != graph.values[vid].dims:
            break
        nodes.append(producer[vid])
        vid = src
    return nodes


def _copied_from(graph: Graph, producer: dict[int, int], vid: int) -> int:
    """The value `vid` is a clone of (clones_of), else `vid`."""
    nodes = clones_of(graph, producer, vid)
    return graph.node(nodes[-1]).args[0] if nodes else vid


def _join_key(graph: Graph, producer: dict[int, int], pair: DualLinear):
    """Pairs with equal keys may share a dispatch (JoinedLinears, PairedLinears); None: this
    one runs alone. Such pairs are decode pairs without bias whose weight, sums and scales
    are file constants stored as they are (their first N rows / words join)."""
    calls = [graph.node(n) for n in pair.linears]
    if pair.m > SKINNY_ROWS or any(graph.values[c.args[6]] is not None for c in calls):
        return None
    for vid in calls[0].args[3:6]:   # W, sums, scales: prefixes of their file bytes join
        t = graph.values[vid]
        nbytes = graph.constants[t.constant_id].nbytes if t.is_constant else -1
        if not (t.is_constant and file_convert(t, nbytes) is None
                and nbytes == storage_bytes(t)):
            return None
    add = tuple(sorted((k, repr(v)) for k, v in pair.add_element.items()))
    return (*(_buffer_key(graph, _copied_from(graph, producer, c.args[0])) for c in calls),
            pair.m, pair.k, add)


@dataclass(frozen=True)
class SharedDispatches:
    """Dual linears that share a dispatch: PairedLinears keyed by the second's root,
    JoinedLinears by the first pair's root, and the roots of the pairs they take in (which
    plan nothing)."""

    paired: dict[int, PairedLinears]
    joined: dict[int, JoinedLinears]

    @property
    def away(self) -> set[int]:
        return ({p.first.root for p in self.paired.values()}
                | {p.root for j in self.joined.values() for p in j.pairs[1:]})


def share_dual_linears(graph: Graph, pairs: dict[int, DualLinear], uses: Uses,
                       features, binding_limit: int | None = None) -> SharedDispatches:
    """The MLP's gate and up paired, then the pairs left that read the same inputs (q, k and
    v) joined in groups of up to JOIN_MAX; none with `q8_join:off`. The weights a shared
    dispatch binds as one buffer stay within `binding_limit` bytes."""
    if JOIN_HINT + "off" in features or not pairs:
        return SharedDispatches({}, {})
    fits = (lambda *ps: True) if binding_limit is None else (
        lambda *ps: sum(p.n * p.k for p in ps) <= binding_limit)
    producer = {op.args[-1]: node for node, op in enumerate(graph.nodes) if op.args}
    paired = {at: p for at, p in _pair_dual_linears(graph, pairs, uses, producer).items()
              if fits(p.first, p.second)}
    firsts = {p.first.root for p in paired.values()}
    by_key: dict = {}
    for root in sorted(pairs):
        key = (None if pairs[root].epilogue or root in firsts
               else _join_key(graph, producer, pairs[root]))
        if key is not None:
            by_key.setdefault(key, []).append(pairs[root])
    joined: dict[int, JoinedLinears] = {}
    for members in by_key.values():
        chunk: list[DualLinear] = []
        for m in [*members, None]:
            if m is not None and len(chunk) < JOIN_MAX and fits(*chunk, m):
                chunk.append(m)
                continue
            if len(chunk) > 1:
                joined[chunk[0].root] = JoinedLinears(tuple(chunk))
            chunk = [m] if m is not None else []
    return SharedDispatches(paired, joined)


def _pair_dual_linears(graph: Graph, pairs: dict[int, DualLinear], uses: Uses,
                       producer: dict[int, int]) -> dict[int, PairedLinears]:
    by_result = {graph.node(p.root).args[-1]: p for p in pairs.values()}
    out: dict[int, PairedLinears] = {}
    for second in pairs.values():
        if not second.epilogue or len(second.epilogue_inputs) != 1:
            continue
        held = second.epilogue_inputs[0]
        first = by_result.get(held)
        if (first is None or first.epilogue_inputs or first.n != second.n
                or first.root > second.root
                or not _read_within(graph, uses, held, [first.root, *second.epilogue])):
            continue
        key = _join_key(graph, producer, first)
        if key is not None and key == _join_key(graph, producer, second):
            out[second.root] = PairedLinears(first, second)
    return out


TAIL_COLUMNS = 4   # the skinny paired kernel's columns an invocation: one int8 word a row


def _scalar_file_constant(graph: Graph, vid: int) -> bool:
    """A one-element f32 or i32 constant whose file bytes are its buffer (delegates prepack
    constants apart: `prepacked` gives the constant a prepacked value holds)."""
    t = graph.values[prepacked(graph).get(vid, vid)]
    if not (isinstance(t, TensorValue) and t.is_constant and t.numel == 1):
        return False
    nbytes = graph.constants[t.constant_id].nbytes
    return (storage_of(t) in ("f32", "i32") and file_convert(t, nbytes) is None
            and nbytes == storage_bytes(t))


def attach_tails(graph: Graph, paired: dict[int, PairedLinears], groups: dict[int, Group],
                 elements: dict[int, Element], uses: Uses, features) -> set[int]:
    """Give each paired dispatch of the skinny kernels the packed group (or lone elementwise
    node) that alone reads its result (Tail), updating `paired`; returns the nodes taken
    (they plan nothing). The group's dispatch moves up to the pair's place: it reads nothing
    else that is made in between."""
    if decode_variant(features).startswith("splitk") or DECODE_VARIANTS[
            decode_variant(features)]["cols"] // 2 != TAIL_COLUMNS:
        return set()
    taken: set[int] = set()
    grouped = {node for g in groups.values() for node in g.nodes}
    candidates = list(groups.values()) + [
        Group([node], graph.tensor(e.out).numel, list(dict.fromkeys(e.inputs)))
        for node, e in elements.items() if node not in grouped]
    by_input: dict[int, list[Group]] = {}
    for g in candidates:
        if g.external and g.head is None:
            by_input.setdefault(g.external[0], []).append(g)
    for root, pp in list(paired.items()):
        held = graph.node(pp.root).args[-1]
        m, n = pp.second.m, pp.second.n
        if storage_of(graph.values[held]) != "f32":
            continue   # the tail takes the result as the f32 it would have stored
        for g in by_input.get(held, []):
            consts = tuple(v for v in g.external if v != held)
            outs = [elements[node].out for node in g.outputs]
            if (n % TAIL_COLUMNS or g.numel != m * n
                    or not all(_scalar_file_constant(graph, v) for v in consts)
                    or not all(storage_of(graph.values[v]) in PACKED for v in outs)
                    or not _read_within(graph, uses, held, [pp.root, *g.nodes])
                    or 5 + bool(consts) + len(outs) > MAX_BINDINGS):  # xa xb w percol p
                continue
            paired[root] = PairedLinears(pp.first, pp.second, Tail(g, consts))
            taken.update(g.nodes)
            break
    return taken
