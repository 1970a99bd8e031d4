"""One elementwise op for one element, shared by its own kernel, fused chains and the dual
int8 linear: what it reads and writes, its compute type and its constants. The WGSL for it
is one macro, `expr` in shaders/_elementwise.wgsl.j2."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Element:
    """An elementwise op as data.

    `ty` is the compute type (f32, or exact i32); `params` holds the op's constants as the
    template reads them (add/sub: alpha; clamp: lo, hi; gelu: its polynomial constants;
    compare .Scalar: the scalar). Comparisons and logical ops give 0/1 in `ty`.
    `runtime` holds per-dispatch scalars (quantize: 1/scale, zero point, range; fill: its
    value; pow: NaN and inf, which no WGSL literal spells) as words of the kernel's params
    buffer `p`, read from word `at` on (`spec`), so that dispatches that differ only in them
    render the same source (one pipeline).
    `fusible` is False for forms whose expression needs helper functions of their own
    template (gelu's erf).
    """

    op: str
    inputs: tuple[int, ...]
    out: int
    ty: str
    params: dict = field(default_factory=dict)
    runtime: tuple[float | int, ...] = ()
    fusible: bool = True

    def spec(self, at: int = 0) -> dict:
        """What `_elementwise.wgsl.j2`'s `expr` macro takes; `at`: the params word where
        `runtime` starts."""
        return {"op": self.op, "ty": self.ty, "at": at, **self.params}
