"""Planner hints per adapter type: which kernel variants suit the device (data, not code).

A hint is a pseudo-feature among the lowering's features ("q8_decode:splitk",
"attn_kv_chunk:256"). Natively the adapter type comes from wgpu (`adapter_type`: "CPU",
"DiscreteGPU", ...); in the page the worker tells "CPU" from a fallback / software adapter.
Measured with `webpte bench --roofline --variants`: on lavapipe and SwiftShader the split
kernels are slower, so CPU adapters keep the plain ones.
"""

from __future__ import annotations

from ..kernels.attention._tiled import KV_CHUNK_HINT
from ..kernels.matmul.matmul import F32_GEMM_DIRECT
from ..kernels.quantized.linear_q8 import decode_hint, gemm_hint

# Keys per split for decode attention on GPUs: a 4-row window of 9 heads over a 2k context
# becomes 36 x 8 workgroups instead of 36.
GPU_KV_CHUNK = 256


def adapter_hints(adapter_type: str) -> frozenset[str]:
    """The planner hints for an adapter of this type ("CPU" or a GPU type; "" is a GPU)."""
    hints = {decode_hint(adapter_type)}
    if adapter_type != "CPU":
        hints.add(f"{KV_CHUNK_HINT}{GPU_KV_CHUNK}")
    else:   # GPUs keep the default many-row tiles and the tiled f32 matmul
        hints.add(gemm_hint(adapter_type))
        hints.add(F32_GEMM_DIRECT)
    return frozenset(hints)


ADAPTER_TYPE = "adapter_type:"


def resolve_hints(features) -> frozenset[str]:
    """`features` with an `adapter_type:X` entry (what the page passes) replaced by that
    adapter's hints; a hint given explicitly (e.g. by `webpte bench --variants`) wins."""
    plain = {str(f) for f in features if not str(f).startswith(ADAPTER_TYPE)}
    types = sorted(str(f)[len(ADAPTER_TYPE):] for f in features
                   if str(f).startswith(ADAPTER_TYPE))
    if not types:
        return frozenset(plain)
    given = {f.split(":", 1)[0] for f in plain if ":" in f}
    return frozenset(plain | {h for h in adapter_hints(types[-1])
                              if h.split(":", 1)[0] not in given})
