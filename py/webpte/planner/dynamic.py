"""Dynamic shapes: a graph exported with upper-bound dims, specialized to a call's dims.

ExecuTorch marks such inputs DYNAMIC_BOUND: the serialized dims are upper bounds and a call
may pass smaller ones. Plans are static (kernels bake their sizes in), so a call with other
dims gets a graph of its own: the inputs' dims replaced and every op's outputs re-derived by
its unit's shape rule (`OpUnit.shape`, or the broadcast rule of elementwise units), each
within its bound; then it is lowered as any graph. An op with no rule on the changed path is
an UnsupportedOpError that says to call with the exported shape.
"""

from __future__ import annotations

import dataclasses

from ..errors import InputError, PlanError, UnsupportedOpError
from ..kernels.registry import registry
from ..pte.graph import Graph, TensorValue, ValueList


def broadcast_dims(*shapes) -> tuple[int, ...]:
    """numpy broadcasting of dims (PlanError when they do not broadcast)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        sizes = {s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0} - {1}
        if len(sizes) > 1:
            raise PlanError(f"dims {[list(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _elementwise_rule(values, call) -> dict[int, tuple[int, ...]]:
    *ins, out = call.args
    shapes = [values[v].dims for v in ins if isinstance(values[v], TensorValue)]
    return {out: broadcast_dims(*shapes)}


def specialize(graph: Graph, input_ids, shapes) -> Graph:
    """`graph` with its inputs' dims set to `shapes` (each within its exported bound) and
    every dependent value's dims derived op by op."""
    values = list(graph.values)
    changed: set[int] = set()

    def set_dims(vid: int, dims: tuple[int, ...], what: str) -> None:
        t = values[vid]
        dims = tuple(int(d) for d in dims)
        if len(dims) != len(t.dims) or any(not 0 <= d <= b for d, b in zip(dims, t.dims)):
            raise InputError(f"{what} has dims {list(dims)}; the program was exported for "
                             f"dims up to {list(t.dims)}")
        if dims != t.dims:
            values[vid] = dataclasses.replace(t, dims=dims)
            changed.add(vid)

    for i, (vid, dims) in enumerate(zip(input_ids, shapes)):
        set_dims(vid, dims, f"input {i}")
    reg = registry()
    for node, op in enumerate(graph.chain):
        ids = []
        for a in op.args:
            v = values[a]
            ids += list(v.ids) if isinstance(v, ValueList) else [a]
        if not changed.intersection(ids):
            continue
        unit = reg[op.name]
        rule = unit.shape or (_elementwise_rule if unit.element is not None else None)
        if rule is None:
            raise UnsupportedOpError(
                f"{op.name} (node {node}) has no shape rule for dynamic shapes; call the "
                f"program with its exported dims", [op.name])
        for vid, dims in rule(values, op).items():
            set_dims(vid, dims, f"{op.name} (node {node}) output value {vid}")
    return dataclasses.replace(graph, values=values)
