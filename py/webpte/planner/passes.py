"""The passes between reading a method and lowering it: each a function Graph -> Graph, run
in the order of PASSES, the one place that lists them.

    split_weights     weights past the binding limit become row/column blocks (split.py)
    share_duplicates  repeated elementwise ops computed once (share.py)
    dual_linears      the two passes of a two-pass int8 linear, their add and epilogue
                      -> one `dual_linear` node (fusion_q8.py)
    elementwise       chains of elementwise ops (and the rms_norm that feeds one alone, and
                      siblings reading the same value) -> one `elementwise` node (fusion.py)
    shared_linears    dual linears on the same inputs -> one `paired_linears` node (the
                      MLP's gate and up) or one `joined_linears` node (q, k and v)
    tails             the int8 quantize group that alone reads a paired result moves into
                      its `paired_linears` node

A fusing pass replaces the nodes it fuses by one FusedCall at the place its dispatch takes
(the node whose index the plan's dispatch keeps) and drops the others; the graph keeps the
chain as the reader made it (FusedGraph.nodes), so node n of every pass is the same node and
a fused node names the nodes it computes. Lowering (lowering.py) then runs one loop: every
node, fused or not, lowered by its unit. The interpreter runs a fused node as its own nodes
in order (Graph.unfused), so a fused kernel is checked against the ops it replaced.

Order matters: the dual linears are found on the unfused chain; the elementwise groups
leave out the nodes they took and those that write state; the tails come last.
WEBPTE_FUSE (or `lower(fuse=...)`) picks a prefix of levels: "0" keeps the passes that are
not fusions, "elementwise" adds duplicate sharing and elementwise groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import PlanError
from ..kernels.element import Element
from ..pte.graph import Graph, OpCall
from .fusion import Group, Uses, _element, find_groups
from .fusion_q8 import attach_tails, clones_of, find_dual_linears, share_dual_linears
from .share import share_duplicates
from .split import split_large_weights


@dataclass(frozen=True, eq=False)
class FusedCall(OpCall):
    """A node a pass made: `nodes` (original node indices, in the order they compute) run
    as one dispatch of the `kind` unit (lowering.FUSED), from the pass's decision `fused`
    (a Group, DualLinear, PairedLinears or JoinedLinears). `args` are the values its nodes
    read and write."""

    kind: str = ""
    fused: Any = None
    nodes: tuple[int, ...] = ()
    elements: dict[int, Element] = field(default_factory=dict)   # elementwise: node -> spec
    # Clone nodes after its place whose source it reads in their stead (a clone shares its
    # source's buffer): the interpreter runs them first, pure copies, and again in place.
    reads: tuple[int, ...] = ()


@dataclass
class FusedGraph(Graph):
    """A graph some pass may have fused nodes of: `chain` holds the nodes left and the fused
    ones, `origin[i]` the original index of chain[i] (a fused node's: its place), `base` the
    chain before fusion (node n is base[n]), `uses` how the method uses its values."""

    base: list[OpCall] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)
    uses: Uses | None = None

    @property
    def nodes(self) -> list[OpCall]:
        return self.base

    def unfused(self):
        for op, n in zip(self.chain, self.origin, strict=True):
            if isinstance(op, FusedCall):
                yield from ((m, self.base[m]) for m in (*op.reads, *op.nodes))
            else:
                yield n, op

    def plain(self) -> set[int]:
        """The original nodes still in the chain as they are."""
        return {n for op, n in zip(self.chain, self.origin, strict=True)
                if not isinstance(op, FusedCall)}

    def fused(self, kind: str) -> dict[int, FusedCall]:
        """The `kind` nodes by their place, in chain order."""
        return {n: op for op, n in zip(self.chain, self.origin, strict=True)
                if isinstance(op, FusedCall) and op.kind == kind}

    def call(self, kind: str, fused, nodes, reads=(), elements=None) -> FusedCall:
        """A `kind` node computing `nodes` (original indices) from the pass's decision."""
        nodes = tuple(sorted(set(nodes)))
        args = tuple(dict.fromkeys(v for n in nodes for v in self.base[n].args))
        return FusedCall(f"webpte.fused.{kind}", args, kind=kind, fused=fused, nodes=nodes,
                         elements=elements or {}, reads=tuple(reads))

    def rewrite(self, place: dict[int, FusedCall], drop) -> FusedGraph:
        """This graph with node `n` of `place` replaced by place[n] and the nodes in `drop`
        (original indices) removed."""
        chain, origin = [], []
        for op, n in zip(self.chain, self.origin, strict=True):
            if n in place:
                chain.append(place[n])
            elif n in drop:
                continue
            else:
                chain.append(op)
            origin.append(n)
        if not set(place) <= set(origin):
            raise PlanError(f"a pass placed fused nodes at nodes {sorted(set(place) - set(origin))}"
                            " that are no longer in the chain (a planner bug)")
        return FusedGraph(self.values, chain, self.input_ids, self.output_ids, self.constants,
                          self.base, origin, self.uses)


@dataclass(frozen=True)
class PassContext:
    """What passes know of the method besides its graph."""

    input_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    state_ids: tuple[int, ...]   # values that persist across calls (never fused away)
    features: frozenset[str]     # WGSL features and planner hints of the target
    binding: int                 # its max_storage_buffer_binding_size


def fusable(graph: Graph, ctx: PassContext) -> FusedGraph:
    """`graph` as a FusedGraph (the chain so far is its base)."""
    if isinstance(graph, FusedGraph):
        return graph
    return FusedGraph(graph.values, list(graph.chain), graph.input_ids, graph.output_ids,
                      graph.constants, list(graph.chain), list(range(len(graph.chain))),
                      Uses.of(graph, ctx.input_ids, ctx.output_ids + ctx.state_ids))


def _writes_state(g: FusedGraph, ctx: PassContext) -> set[int]:
    state = set(ctx.state_ids)
    return {n for n, op in enumerate(g.nodes) if op.args and op.args[-1] in state}


# -- the passes ----------------------------------------------------------------------------

def split_weights(graph: Graph, ctx: PassContext) -> Graph:
    return split_large_weights(graph, ctx.binding)


def share(graph: Graph, ctx: PassContext) -> Graph:
    return share_duplicates(graph, frozenset(ctx.input_ids + ctx.output_ids),
                            frozenset(ctx.state_ids))


def dual_linears(graph: Graph, ctx: PassContext) -> Graph:
    g = fusable(graph, ctx)
    place, drop = {}, set()
    for root, d in find_dual_linears(g, g.uses).items():
        nodes = (*d.linears, d.add, *d.epilogue)
        place[root] = g.call("dual_linear", d, nodes)
        drop.update(nodes)
    return g.rewrite(place, drop)


def elementwise(graph: Graph, ctx: PassContext) -> Graph:
    g = fusable(graph, ctx)
    taken = set(range(len(g.nodes))) - g.plain()   # fused by an earlier pass
    groups, elements = find_groups(g, g.uses, exclude=taken | _writes_state(g, ctx),
                                   unstable=frozenset(ctx.state_ids))
    place, drop = {}, set()
    for at, group in groups.items():
        place[at] = g.call("elementwise", group, group.nodes,
                           elements={n: elements[n] for n in group.nodes if n in elements})
        drop.update(group.nodes)
    return g.rewrite(place, drop)


def shared_linears(graph: Graph, ctx: PassContext) -> Graph:
    g = fusable(graph, ctx)
    duals = {at: op.fused for at, op in g.fused("dual_linear").items()}
    shared = share_dual_linears(g, duals, g.uses, ctx.features, ctx.binding)
    nodes_of = {at: op.nodes for at, op in g.fused("dual_linear").items()}
    producer = {op.args[-1]: n for n, op in enumerate(g.nodes) if op.args}

    def call(kind, fused, at, pairs):
        # Each pass's input is read as the value its clones copy (_join_key): clones made
        # after the place are read through.
        reads = sorted({c for p in pairs for n in p.linears
                        for c in clones_of(g, producer, g.node(n).args[0]) if c > at},
                       reverse=True)
        return g.call(kind, fused, [n for p in pairs for n in nodes_of[p.root]], reads)

    place = {}
    for at, pp in shared.paired.items():
        place[at] = call("paired_linears", pp, at, (pp.first, pp.second))
    for at, j in shared.joined.items():
        place[at] = call("joined_linears", j, at, j.pairs)
    return g.rewrite(place, shared.away)


def tails(graph: Graph, ctx: PassContext) -> Graph:
    g = fusable(graph, ctx)
    fused = g.fused("paired_linears")
    if not fused:
        return g
    paired = {at: op.fused for at, op in fused.items()}
    groups: dict[int, Group] = {at: op.fused for at, op in g.fused("elementwise").items()}
    elements: dict[int, Element] = {}
    for op in g.fused("elementwise").values():
        elements.update(op.elements)
    state = _writes_state(g, ctx)
    for n in sorted(g.plain() - state):   # lone elementwise nodes may be tails too
        if (e := _element(g, n)) is not None:
            elements[n] = e
    taken = attach_tails(g, paired, groups, dict(sorted(elements.items())), g.uses,
                         ctx.features)
    place = {at: g.call("paired_linears", pp, fused[at].nodes + tuple(pp.tail.group.nodes),
                        fused[at].reads)
             for at, pp in paired.items() if pp.tail is not None}
    return g.rewrite(place, taken)


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Graph, PassContext], Graph]
    level: int   # 0: always; 1: with elementwise fusion; 2: with every fusion


PASSES: tuple[Pass, ...] = (
    Pass("split_weights", split_weights, 0),
    Pass("share_duplicates", share, 1),
    Pass("dual_linears", dual_linears, 2),
    Pass("elementwise", elementwise, 1),
    Pass("shared_linears", shared_linears, 2),
    Pass("tails", tails, 2),
)

FUSE_LEVELS = {False: 0, "elementwise": 1, True: 2}


def passes_for(fuse: bool | str) -> list[Pass]:
    """The passes a fusion setting runs (lower's `fuse`), in order."""
    return [p for p in PASSES if p.level <= FUSE_LEVELS[fuse]]


def run_passes(graph: Graph, ctx: PassContext, passes) -> FusedGraph:
    for p in passes:
        graph = p.run(graph, ctx)
    return fusable(graph, ctx)
