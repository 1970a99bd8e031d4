"""Render WGSL kernels from the jinja2 templates in `shaders/`."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import jinja2

from ..errors import PlanError


def shaders_dir() -> Path:
    """The folder of `*.wgsl.j2` templates (packaged copy first, then the source tree)."""
    packaged = Path(__file__).resolve().parent.parent / "shaders"
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parents[3] / "shaders"
    if source.is_dir():
        return source
    raise FileNotFoundError(f"WGSL templates not found in {packaged} or {source}")


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(shaders_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["f32"] = wgsl_f32
    env.filters["u32"] = lambda v: f"{int(v)}u"
    env.filters["i32"] = lambda v: f"{int(v)}i"
    return env


def wgsl_f32(v: float) -> str:
    """A WGSL f32 literal that round-trips the value exactly."""
    v = float(v)
    try:
        if v != v or v in (float("inf"), float("-inf")):
            raise OverflowError
        return f"bitcast<f32>({_f32_bits(v)}u)"
    except OverflowError:   # a graph's float argument beyond f32: no WGSL constant has it
        raise PlanError(f"{v} has no WGSL f32 literal (NaN, infinite or beyond float32)"
                        ) from None


def _f32_bits(v: float) -> int:
    import struct
    return struct.unpack("<I", struct.pack("<f", v))[0]


def render(template: str, **params) -> str:
    """Render `shaders/<template>.wgsl.j2` (template: `<family>/<name>`); every name the
    template uses must be given."""
    src = _env().get_template(f"{template}.wgsl.j2").render(**params)
    dump = os.environ.get("WEBPTE_DUMP_WGSL")
    if dump:
        digest = hashlib.sha256(src.encode()).hexdigest()[:12]
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"{template.replace('/', '.')}-{digest}.wgsl").write_text(src)
    return src
