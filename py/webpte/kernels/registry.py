"""The op registry: serialized op name -> kernel unit (lowering + numpy reference).

Each module of a family subpackage (`kernels/<family>/<unit>.py`, templates in
`shaders/<family>/`) defines `UNITS = [OpUnit(...), ...]`; the registry collects them all,
so adding an op is adding one module (or a unit in one) and one template.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..pte.graph import OpCall
from .schema import check_graph, parse_signature


@dataclass(frozen=True)
class OpUnit:
    """One op family.

    lower(L, call): emit the dispatches of `call` through the Lowering `L`
        (plan.lowering.Lowering); raise UnsupportedOpError for forms it cannot run.
    reference(R, call): compute the outputs with numpy through the RefEnv `R`
        (kernels.reference.RefEnv), with the same arithmetic the GPU uses.
    """

    names: tuple[str, ...]
    lower: Callable
    reference: Callable
    # name -> argument signature (kernels/schema.py), one for every name: checked for every
    # call before lower/reference/element see it.
    schema: dict[str, str]
    # Ops that only move data between placements (no arithmetic) may say so:
    # the planner uses it for histograms only.
    doc: str = ""
    # element(A, call) -> kernels.elementwise.Element, for ops that map one element of
    # same-shaped (or 0-d) operands to one output element: lets the planner fuse chains.
    element: Callable | None = None
    # shape(values, call) -> {output value id: dims}: the outputs' dims for other input dims
    # (dynamic shapes, planner/dynamic.py). Elementwise units broadcast without one.
    shape: Callable | None = None
    # Positions of the arguments the op writes in place besides its output (llama's
    # update_cache writes its cache argument); a prepacked value written so is state.
    mutates: tuple[int, ...] = ()


_REGISTRY: dict[str, OpUnit] | None = None
_SCHEMAS: dict[str, tuple] | None = None


def registry() -> dict[str, OpUnit]:
    global _REGISTRY, _SCHEMAS
    if _REGISTRY is None:
        table: dict[str, OpUnit] = {}
        schemas: dict[str, tuple] = {}
        # Units live in the family subpackages (elementwise/, layout/, reduce/, ...) of
        # this package, found on disk (imported by name: no import circle with __init__).
        for info in sorted(pkgutil.walk_packages([str(Path(__file__).parent)], f"{__package__}."),
                           key=lambda m: m.name):
            if info.ispkg or info.name.count(".") < 3 or info.name.rsplit(".", 1)[1][0] == "_":
                continue
            mod = importlib.import_module(info.name)
            for unit in getattr(mod, "UNITS", ()):
                for name in unit.names:
                    if name in table:
                        raise RuntimeError(f"op {name} registered twice")
                    if name not in unit.schema:
                        raise RuntimeError(f"op {name} ({mod.__name__}) has no schema")
                    table[name] = unit
                    schemas[name] = parse_signature(unit.schema[name])
        _REGISTRY, _SCHEMAS = table, schemas
    return _REGISTRY


def schemas() -> dict[str, tuple]:
    """Parsed argument signatures of every registered op name."""
    registry()
    return _SCHEMAS


def check_graph_args(graph) -> None:
    """Every call's arguments against its op's schema (PlanError naming the node)."""
    check_graph(graph, schemas())


def unit_for(op: OpCall) -> OpUnit | None:
    return registry().get(op.name)


def written_in_place(graph) -> frozenset[int]:
    """Values some op of the graph writes in place (OpUnit.mutates)."""
    mutating = {name: unit.mutates for name, unit in registry().items() if unit.mutates}
    return frozenset(op.args[i] for _, op in graph.unfused() if op.name in mutating
                     for i in mutating[op.name] if i < len(op.args))


def missing_ops(names) -> list[str]:
    reg = registry()
    return sorted({n for n in names if n not in reg})
