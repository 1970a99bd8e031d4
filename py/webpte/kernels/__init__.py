"""Kernel units: one module per op family (lowering + numpy reference).

Each module defines `UNITS`; templates live in `shaders/<family>.wgsl.j2`.
"""

from .registry import OpUnit, missing_ops, registry

__all__ = ["OpUnit", "missing_ops", "registry"]
