"""Computing repeated elementwise ops once (a plan pass before fusion).

The decoder recipe quantizes one normed activation once per projection that reads it (q, k
and v; gate and up) with the same parameters and constants of the same bytes: the same
values computed three times, three dispatches each. `share_duplicates` keeps the first op
of each repeat and lets the others' readers read its result: the results are the same
values, so the plan is bit-identical with fewer dispatches.
"""

from __future__ import annotations

from ..errors import PlanError, UnsupportedOpError
from ..kernels.common import Args
from ..kernels.element import Element
from ..kernels.registry import registry
from ..kernels.storage import constant_key
from ..pte.graph import Graph, OpCall, TensorValue, ValueList

PREPACK = "et_vk.prepack.default"


def prepacked(graph: Graph, fixed=frozenset()) -> dict[int, int]:
    """Prepacked value -> its source: a prepacked constant holds the constant's bytes and
    shares its buffer (delegates prepack each use of a constant apart)."""
    return {op.args[1]: op.args[0] for op in graph.nodes
            if op.name == PREPACK and len(op.args) == 2 and op.args[1] not in fixed}


def arg_key(graph: Graph, vid: int, derived=None) -> tuple:
    """What an argument holds: a constant's bytes, a scalar's value, the key of a value
    computed from constants only (`derived`), else the value itself."""
    if derived and vid in derived:
        return derived[vid]
    v = graph.values[vid]
    if isinstance(v, TensorValue) and v.is_constant:
        return ("const", v.dtype, v.dims, *constant_key(graph, v))
    if v is None or isinstance(v, (bool, int, float, str, tuple)):
        return ("scalar", type(v).__name__, v)
    return ("value", vid)


def element_spec(graph: Graph, node: int) -> Element | None:
    """The node's element spec (kernels/element.py), or None: not an elementwise unit, or a
    form its own lowering refuses (and reports)."""
    op = graph.node(node)
    unit = registry().get(op.name)
    if unit is None or unit.element is None:
        return None
    try:
        return unit.element(Args(graph, f"{op.name} (node {node})"), op)
    except (UnsupportedOpError, PlanError):
        return None   # its own lowering reports why


VIEW = "aten.view_copy.default"


def _view(graph: Graph, op: OpCall) -> tuple[tuple[int, ...], int | None]:
    """(inputs, result) of a view_copy (x, size, out), which share_duplicates keys as it does
    an elementwise op: views of one value to the same dims are the same value (each layer of
    the decoder views the sink's position weight again before its blend); else ((), None)."""
    if op.name != VIEW or len(op.args) != 3 or not isinstance(graph.values[op.args[0]],
                                                                   TensorValue):
        return (), None
    return (op.args[0],), op.args[2]


def share_duplicates(graph: Graph, keep=frozenset(), state=frozenset()) -> Graph:
    """The graph less each elementwise op (or view_copy) that repeats an earlier one on a
    runtime value:
    same op, same arguments (value ids, equal scalars, constants of the same bytes or
    values computed from them alike), its result read from the earlier op's instead; then
    less the elementwise ops whose results nothing reads any more.

    Ops on constants only stay where they are (each fused chain evaluates its own in
    registers) but are keyed by what they compute. Values in `keep` (method inputs and
    outputs) are never dropped; `state` values and values some op writes in place (the last
    argument of more than one op) are neither dropped nor read by a shared op."""
    written: dict[int, int] = {}
    for op in graph.chain:
        if op.args:
            written[op.args[-1]] = written.get(op.args[-1], 0) + 1
    mutable = set(state) | {v for v, n in written.items() if n > 1}
    fixed = set(keep) | mutable
    in_lists = {u for v in graph.values if isinstance(v, ValueList) for u in v.ids}
    source = prepacked(graph, fixed)
    derived: dict[int, tuple] = {v: arg_key(graph, s) for v, s in source.items()
                                 if graph.values[s].is_constant}
    rename: dict[int, int] = {}
    seen: dict[tuple, int] = {}
    kept: list[tuple[OpCall, int | None]] = []   # (op, its result when elementwise)
    for node, op in enumerate(graph.chain):
        args = tuple(rename.get(a, a) for a in op.args)
        op = OpCall(op.name, args, op.node_id) if args != op.args else op
        e = element_spec(graph, node)
        inputs, result = (e.inputs, e.out) if e is not None else _view(graph, op)
        if (result is None or result != args[-1] or result in fixed or result in in_lists
                or any(a in mutable for a in args[:-1])):
            kept.append((op, None))
            continue
        out = graph.values[result]
        key = (op.name, out.dtype, out.dims, *(arg_key(graph, a, derived) for a in args[:-1]))
        if all(rename.get(v, v) in derived or graph.values[v].is_constant for v in inputs):
            derived[result] = ("derived", *key)
        elif key in seen:
            rename[result] = seen[key]
            continue
        else:
            seen[key] = result
        kept.append((op, result))
    if not rename:
        return graph
    # Then elementwise ops nothing reads any more (the constant-only ops of a shared chain).
    listed = {u for v in graph.values if isinstance(v, ValueList) for u in v.ids}
    while True:
        read = {a for op, _ in kept for a in op.args[:-1]} | fixed | listed
        alive = [(op, out) for op, out in kept if out is None or out in read]
        if len(alive) == len(kept):
            break
        kept = alive
    return Graph(graph.values, [op for op, _ in kept], graph.input_ids, graph.output_ids,
                 graph.constants)
