"""W rows regrouped for the few-row int8 kernel's invocations (the `q8_w:interleaved` hint).

A "file_parts" constant may carry `interleave`: {"row_bytes": K, "rows": n, "segments": s,
"group": g}. Its parts, back to back, are s segments of n rows of K bytes (K % 16 == 0). The
buffer holds, for each group of g rows (the last one's missing rows repeat row n - 1, as the
kernel clamps them), for each 16-byte block of a row, that block of the group's rows of
segment 0, then of segment 1, ...: an invocation computing the group's columns (of every
segment: the paired linears) reads its s * g rows' words next to one another, one stream, where
the row-major layout has it read s * g rows K bytes apart. On lavapipe a 4-row dual linear
took 0.79-1.03x the row-major time, the 49152-column output linear 0.71-0.76x; SwiftShader
gains nothing.
"""

from __future__ import annotations

from ..errors import PlanError

try:
    import numpy as np
except ImportError:  # pragma: no cover - Pyodide plans without numpy; the executors have it
    np = None

BLOCK = 16   # bytes: one vec4<u32> word
KEYS = ("row_bytes", "rows", "segments", "group")


def interleaved_bytes(spec: dict) -> int:
    """Bytes of the regrouped buffer."""
    groups = -(-spec["rows"] // spec["group"])
    return groups * spec["segments"] * spec["group"] * spec["row_bytes"]


def check(spec, source_bytes: int) -> str | None:
    """Why `spec` cannot regroup `source_bytes` bytes of parts, or None."""
    if not isinstance(spec, dict) or set(spec) != set(KEYS):
        return "interleave needs exactly " + ", ".join(KEYS)
    if not all(isinstance(spec[k], int) and not isinstance(spec[k], bool) and spec[k] > 0
               for k in KEYS):
        return "interleave sizes must be positive integers"
    if spec["group"] > spec["rows"]:   # keeps the regrouped bytes under twice the source's
        return f"interleave group {spec['group']} exceeds its {spec['rows']} rows"
    if spec["row_bytes"] % BLOCK:
        return f"interleave row_bytes {spec['row_bytes']} is not a multiple of {BLOCK}"
    if spec["segments"] * spec["rows"] * spec["row_bytes"] != source_bytes:
        return (f"interleave of {spec['segments']} x {spec['rows']} rows of "
                f"{spec['row_bytes']} bytes, the parts hold {source_bytes}")
    return None


def interleave(raw: bytes, spec: dict) -> bytes:
    """The regrouped bytes of `raw` (the parts back to back)."""
    why = check(spec, len(raw))
    if why:
        raise PlanError(why)
    s, n, g, k = spec["segments"], spec["rows"], spec["group"], spec["row_bytes"]
    groups = -(-n // g)
    a = np.frombuffer(raw, np.uint8).reshape(s, n, k // BLOCK, BLOCK)
    rows = np.minimum(np.arange(groups * g), n - 1)          # the last group clamped
    a = a[:, rows].reshape(s, groups, g, k // BLOCK, BLOCK)
    return a.transpose(1, 3, 0, 2, 4).tobytes()               # group, block, segment, row
