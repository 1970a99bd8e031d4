"""One elementwise op as WGSL for one element, shared by its own kernel and by fusion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Element:
    """What an elementwise op computes for one element.

    `expr(*operands)` takes WGSL expressions of type `ty` for `inputs` (in order) and
    returns the op's result as a WGSL expression of type `ty`. `fusible` is False for
    forms whose expression needs helper functions of their own template (gelu's erf).
    """

    op: str
    inputs: tuple[int, ...]
    out: int
    ty: str
    expr: Callable[..., str]
    fusible: bool = True
