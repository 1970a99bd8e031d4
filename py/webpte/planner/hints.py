"""Planner hints per adapter type: which kernel variants suit the device (data, not code).

A hint is a pseudo-feature among the lowering's features ("q8_decode:splitk",
"attn_kv_chunk:256"). Natively the adapter type comes from wgpu (`adapter_type`: "CPU",
"DiscreteGPU", ...); in the page the worker tells "CPU" from a fallback / software adapter.
Measured with `webpte bench --roofline --variants`: on lavapipe and SwiftShader the split
kernels are slower, so CPU adapters keep the plain ones; their attention runs one row per
invocation (SmolLM2's decode window on lavapipe: 438 -> 131 us a layer; SwiftShader 2.78 ms
-> 0.14 ms), since barriers are slow there.
"""

from __future__ import annotations

from ..kernels.attention._tiled import ATTENTION_HINT, KV_CHUNK_HINT
from ..kernels.matmul.matmul import F32_GEMM_DIRECT
from ..kernels.quantized.linear_q8 import (
    DECODE_HINT,
    DOT_HINT,
    F32_HINT,
    GEMM_HINT,
    W_HINT,
    decode_hint,
    gemm_hint,
)
from ..kernels.reduce.rms_norm import NORM_REDUNDANT
from ..kernels.sampling.topk import TOPK_HINT

# Keys per split for decode attention on GPUs: a 4-row window of 9 heads over a 2k context
# becomes 36 x 8 workgroups instead of 36.
GPU_KV_CHUNK = 256


# Refinements for one software driver, found in the adapter's device name, measured the same
# way: lavapipe's many-row int8 linears take 0.85-0.9x d8x16's time as d16x16 (the SmolVLM
# tower, interleaved), while SwiftShader took 2x d8x16's time with d16x16 (1024x768x768).
# SwiftShader's dot4I8Packed is slower than unpacking each word once with shifts and taking
# i32 dots: SmolLM2's decode linears in 0.65x the time (DOT_HINT; lavapipe keeps dot4).
# The few-row dual kernel's products in f32 (F32_HINT) took SmolLM2's window in 0.96-0.975x
# the time of the int dot on one machine (both drivers); on another (an AMD EPYC)
# 1.15x on lavapipe, 0.89-1.0x natively on SwiftShader and 0.80-0.85x in the page
# (SwiftShader behind Tint; page / native per pair 1.06 with them, 1.21 without): SwiftShader
# keeps them, lavapipe does not, and the autotune times both (webpte/autotune.CANDIDATES).
# lavapipe's dual kernel reads W regrouped (W_HINT, plan/interleave.py): SmolLM2's window
# 0.88x the row-major time (0.93x with the int dot), where SwiftShader measured 0.95x for the
# window and 1.08x for the linears (not taken).
DRIVER_HINTS = {"llvmpipe": (GEMM_HINT + "d16x16", W_HINT + "interleaved"),
                "swiftshader": (DOT_HINT + "unpacked", F32_HINT + "on")}


def adapter_hints(adapter_type: str, device: str = "") -> frozenset[str]:
    """The planner hints for an adapter of this type ("CPU" or a GPU type; "" is a GPU);
    `device` (the adapter's device name) may refine a CPU adapter's (DRIVER_HINTS)."""
    hints = {decode_hint(adapter_type)}
    if adapter_type != "CPU":
        hints.add(f"{KV_CHUNK_HINT}{GPU_KV_CHUNK}")
        hints.add(TOPK_HINT + "bitonic")   # CPU adapters keep a lane per run (no barriers)
    else:   # GPUs keep the default many-row tiles, tiled f32 matmul and attention
        hints.add(gemm_hint(adapter_type))
        hints.add(F32_GEMM_DIRECT)
        hints.add(ATTENTION_HINT + "serial")
        hints.add(NORM_REDUNDANT)
        for driver, extra in DRIVER_HINTS.items():
            if driver in device.lower():   # each replaces the hint of its kind
                hints = variant_features(hints, "+".join(extra))
    return frozenset(hints)


ADAPTER_TYPE = "adapter_type:"
ADAPTER_DEVICE = "adapter_device:"


def resolve_hints(features) -> frozenset[str]:
    """`features` with an `adapter_type:X` entry (what the page passes) replaced by that
    adapter's hints, refined by an `adapter_device:NAME` entry (the adapter's vendor,
    architecture and description in the page); a hint given explicitly (e.g. by
    `webpte bench --variants`) wins."""
    def given(prefix: str) -> list[str]:
        return sorted(str(f)[len(prefix):] for f in features if str(f).startswith(prefix))

    plain = {str(f) for f in features
             if not str(f).startswith((ADAPTER_TYPE, ADAPTER_DEVICE))}
    types, devices = given(ADAPTER_TYPE), given(ADAPTER_DEVICE)
    if not types:
        return frozenset(plain)
    kinds = {f.split(":", 1)[0] for f in plain if ":" in f}
    return frozenset(plain | {h for h in adapter_hints(types[-1], devices[-1] if devices else "")
                              if h.split(":", 1)[0] not in kinds})


def variant_features(features, variant: str) -> frozenset[str]:
    """`features` planned as a bench variant: `variant` is hints joined by "+"
    ("attention:serial+q8_decode:splitk"), a bare name being a decode kernel ("splitk" is
    "q8_decode:splitk"); each replaces the features' hint of its kind, the adapter's included."""
    hints = {h if ":" in h else DECODE_HINT + h for h in variant.split("+") if h}
    kinds = {h.split(":", 1)[0] + ":" for h in hints}
    kept = {str(f) for f in features if not any(str(f).startswith(k) for k in kinds)}
    return frozenset(kept | hints)
