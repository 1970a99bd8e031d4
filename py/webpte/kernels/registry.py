"""The op registry: serialized op name -> kernel unit (lowering + numpy reference).

Each module of this package defines `UNITS = [OpUnit(...), ...]`; the registry
collects them all, so adding an op family is adding one module and one template.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from ..pte.graph import OpCall


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
    # Ops that only move data between placements (no arithmetic) may say so:
    # the planner uses it for histograms only.
    doc: str = ""
    # element(A, call) -> kernels.elementwise.Element, for ops that map one element of
    # same-shaped (or 0-d) operands to one output element: lets the planner fuse chains.
    element: Callable | None = None


_REGISTRY: dict[str, OpUnit] | None = None


def registry() -> dict[str, OpUnit]:
    global _REGISTRY
    if _REGISTRY is None:
        table: dict[str, OpUnit] = {}
        from .. import kernels as pkg
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if info.name.startswith("_") or info.name in ("registry", "render", "reference",
                                                          "common"):
                continue
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            for unit in getattr(mod, "UNITS", ()):
                for name in unit.names:
                    if name in table:
                        raise RuntimeError(f"op {name} registered twice")
                    table[name] = unit
        _REGISTRY = table
    return _REGISTRY


def unit_for(op: OpCall) -> OpUnit | None:
    return registry().get(op.name)


def missing_ops(names) -> list[str]:
    reg = registry()
    return sorted({n for n in names if n not in reg})
