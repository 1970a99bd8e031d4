"""et_vk.linear_q8ta_q8csw.default: int8 activations x int8 per-channel weights -> f32.

Args: x, input_scale (Double), input_zero_point (Int), W:C int8 [N, K], weight_sums:C int32
[N4], weight_scales:C f32 [N4], bias:C f32 [N4] or Null, out f32 [..., N] (N4 = N padded
to a multiple of 4; only the first N entries are read).

x is normally int8 (quantize_per_tensor, then a clone). A float32 x is also accepted and
quantized in the kernel with the op's scale and zero point (torch's formula, see
quantize.py), so a quantize+linear pair can run as one kernel.

Arithmetic (ExecuTorch's Vulkan shader `linear_fp_output_tile_int8_int8_compute.glslh`;
its Python reference in custom_ops_lib.py instead dequantizes W and runs a float linear,
which only agrees to rounding):
    acc[m, n] = sum_k x[m, k] * W[n, k]                        i32, exact
    adj       = acc - zp * sums[n]                             i32 (wrapping)
    y[m, n]   = f32(adj) * (f32(input_scale) * scales[n])      f32 multiply, f32 product
                + bias[n]                                      f32 add
The numpy reference does exactly this (int64 matmul narrowed to int32, then float32);
a GPU compiler may fuse the last multiply-add, hence a rel-L2 tolerance on y but exact
accumulators.

Accumulation uses WGSL `dot4I8Packed` when the lowering's features include
`packed_4x8_integer_dot_product` (`lower(graph, features=...)`), else a portable path (each
word's bytes unpacked to vec4<i32> with shifts, then an integer dot); the `q8_dot:unpacked`
hint takes the portable path where dot4 exists too (`use_dot4`). W is bound as its file
bytes: row-major [N, K/4] u32 words, four int8 per word, element 0 in the low byte.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..common import hinted_variant
from ..registry import OpUnit
from .quantize import f32, quantize_params, quantize_reference

__all__ = ["DECODE_HINT", "DECODE_VARIANTS", "DOT_HINT", "DOT4_FEATURE", "F32_HINT",
           "SUBGROUPS_FEATURE",
           "SUBGROUPS_IMPLICIT", "GEMM_HINT", "GEMM_VARIANTS",
           "decode_hint", "decode_variant", "gemm_hint", "gemm_variant", "linear_cost",
           "splitk_kernel", "tiling", "use_dot4", "use_f32_dot", "use_interleaved_w", "W_HINT",
           "UNITS"]

NAME = "et_vk.linear_q8ta_q8csw.default"
DOT4_FEATURE = "packed_4x8_integer_dot_product"
# The device has WebGPU's "subgroups" feature: the split-K kernels add their lanes' partial
# sums with subgroupAdd. WGSL asks for `enable subgroups;`, which wgpu-native's naga does not
# parse yet (it takes the builtins without it): natively the features also hold the second.
SUBGROUPS_FEATURE = "subgroups"
SUBGROUPS_IMPLICIT = "subgroups:implicit"
SKINNY_ROWS = 8  # up to this many rows, a decode kernel (no workgroup staging) is used

# Decode kernels (<= SKINNY_ROWS rows) as data. "skinny": `cols` output columns per
# invocation, W rows read straight (fastest on CPU adapters: the dual kernel with 8 columns
# and 32 invocations a workgroup measured 2.1-2.2x the speed of one column, 64 a workgroup,
# on lavapipe for SmolLM2's shapes; "skinny16"/"skinny8", smaller workgroups, are autotune
# candidates, within noise of it there). "splitk*": a workgroup of `lanes` lanes per
# `cols` columns, lanes striding over K words (coalesced reads, enough workgroups for a GPU);
# fewer lanes make the workgroup-memory sum cheaper where lanes run one after another (CPUs).
DECODE_VARIANTS: dict[str, dict[str, int]] = {"skinny": {"cols": 8, "workgroup": 32},
                                              "skinny16": {"cols": 8, "workgroup": 16},
                                              "skinny8": {"cols": 8, "workgroup": 8},
                                              "splitk": {"lanes": 64, "cols": 4},
                                              "splitk16": {"lanes": 16, "cols": 4}}
# A planner hint among the lowering's features ("q8_decode:splitk"); without one, skinny.
DECODE_HINT = "q8_decode:"
# The variant per adapter type (wgpu's adapter_type), measured with `webpte bench --roofline
# --variants`: on lavapipe and SwiftShader the split-K kernels take 1.2-2.1x skinny's time.
DECODE_BY_ADAPTER = {"CPU": "skinny"}
GPU_DECODE = "splitk"
WORKGROUP_BYTES = 16384  # WebGPU's default maxComputeWorkgroupStorageSize
# Many-row tiles of the dual (two-pass) kernel as data: outputs per invocation of an 8x8
# workgroup. "t8x16" (64 x 128 tiles) measured 1.1-1.3x faster than "t8x8" on lavapipe for
# SmolVLM's tower shapes; GPUs keep 8x8 (two passes of 8x16 would hold 256 accumulators).
# "d8x16" and "d16x16" (direct) read x and W words straight from storage (vec4 words when
# K % 16 == 0): no workgroup memory, no barriers, which CPU adapters run as switches between
# a workgroup's SIMD batches. On lavapipe d8x16 took 0.65-0.70x t8x16's time for 1024 rows of
# 768x768, 768x3072 and 3072x768, and the tower's dual linears (interleaved, one process)
# d16x16 0.75x, d8x16 0.83x t8x16's (lavapipe gets d16x16: plan/hints.DRIVER_HINTS); on
# SwiftShader (1024x768x768) d8x16 0.85x t8x16's time, d16x16 1.7x.
GEMM_VARIANTS: dict[str, dict[str, int]] = {"t8x8": {"rm": 8, "rn": 8, "direct": 0},
                                            "t8x16": {"rm": 8, "rn": 16, "direct": 0},
                                            "d8x16": {"rm": 8, "rn": 16, "direct": 1},
                                            "d16x16": {"rm": 16, "rn": 16, "direct": 1}}
GEMM_HINT = "q8_gemm:"
GEMM_BY_ADAPTER = {"CPU": "d8x16"}
GPU_GEMM = "t8x8"
# How the int8 kernels multiply-accumulate where the device has dot4I8Packed: "dot4" with it,
# "unpacked" with the portable path (each packed word unpacked once with shifts, then i32
# dots) in the kernels that reuse an unpacked word for several products (the dual decode
# kernel, the tiles), which SwiftShader runs faster than its dot4I8Packed: SmolLM2's window
# 0.67-0.72x the time, a 256x768x768 dual tile 0.30x, the single tile 0.58x
# (plan/hints.DRIVER_HINTS).
DOT_HINT = "q8_dot:"
DOT_VARIANTS = ("dot4", "unpacked")
# A planner hint: "q8_f32:on" has the few-row dual kernel (linear_q8_dual.wgsl.j2) take its
# int8 products in f32, exact in chunks whose partial sums stay integers below 2^24, whatever
# q8_dot says (the other int8 kernels have no f32 path and follow q8_dot). On lavapipe and
# SwiftShader SmolLM2's window took 0.96-0.975x the time of their dot on one machine; on
# another 1.15x on lavapipe, 0.80-0.85x in the page: SwiftShader's hint (planner/hints.py).
F32_HINT = "q8_f32:"
F32_VARIANTS = ("off", "on")
# A planner hint: "q8_w:interleaved" has the few-row dual kernel read W regrouped at load
# (plan/interleave.py: each invocation's rows' vec4 words side by side, one stream), where
# rows are whole vec4 words; "rows" keeps the file's row-major W (lavapipe's hint).
W_HINT = "q8_w:"
W_VARIANTS = ("rows", "interleaved")


def use_dot4(features, hinted: bool = True) -> bool:
    """Whether an int8 kernel accumulates with dot4I8Packed: the device has it and, for a
    kernel whose portable path unpacks each word once (`hinted`), no `q8_dot:unpacked` hint
    asks for that path (plan/hints.DRIVER_HINTS). On SwiftShader the others (a word
    unpacked for each product) measured slower portable: the one-column skinny linear 1.67x
    dot4's time, the 4-bit linear 1.4-1.5x."""
    return DOT4_FEATURE in features and (
        not hinted
        or hinted_variant(features, DOT_HINT, DOT_VARIANTS, "dot4", "int8 dot") == "dot4")


def use_interleaved_w(features) -> bool:
    """Whether the few-row dual kernel reads W regrouped (`q8_w:interleaved`)."""
    return hinted_variant(features, W_HINT, W_VARIANTS, "rows", "W layout") == "interleaved"


def use_f32_dot(features) -> bool:
    """Whether the few-row dual kernel takes its int8 products in f32 (`q8_f32:on`)."""
    return hinted_variant(features, F32_HINT, F32_VARIANTS, "off", "f32 dot") == "on"


def decode_variant(features) -> str:
    """The decode kernel the lowering's features ask for (the last hint wins)."""
    return hinted_variant(features, DECODE_HINT, DECODE_VARIANTS, "skinny", "decode")


def decode_hint(adapter_type: str) -> str:
    """The planner hint that picks the decode kernel for an adapter of this type."""
    return DECODE_HINT + DECODE_BY_ADAPTER.get(adapter_type, GPU_DECODE)


def gemm_variant(features) -> str:
    """The many-row dual tile the lowering's features ask for (the last hint wins)."""
    return hinted_variant(features, GEMM_HINT, GEMM_VARIANTS, GPU_GEMM, "gemm")


def gemm_hint(adapter_type: str) -> str:
    """The planner hint that picks the many-row dual tile for an adapter of this type."""
    return GEMM_HINT + GEMM_BY_ADAPTER.get(adapter_type, GPU_GEMM)


def linear_cost(m: int, n: int, k: int, passes: int = 1, x_bytes: int = 1,
                per_channel: int = 2, extra_bytes: int = 0, x_loads: int = 1,
                w_loads: int = 1) -> dict[str, int]:
    """Work of `passes` linears on one W (DispatchSpec.cost): W, x and per-channel words
    read once (bytes_read); int8 multiply-adds; and the bytes the invocations load between
    them (bytes_loaded), x loaded `x_loads` times (once for each invocation or workgroup
    that loads all of it: each output column group) and W `w_loads` times (each row tile).
    CPU adapters run every load of every lane, the repeated x loads too."""
    x = passes * m * k * x_bytes
    rest = 4 * n * per_channel + extra_bytes
    return {"bytes_read": n * k + x + rest, "macs": passes * m * n * k,
            "bytes_loaded": w_loads * n * k + x_loads * x + rest}


def splitk_kernel(L, variant: str, m: int, n: int, k: int, passes: int, paired: bool = False,
                  **params):
    """(kernel, workgroups) of linear_q8_splitk (DECODE_VARIANTS[variant]) for `passes`
    linears on one W (`paired`: the same columns of two such, fusion_q8.PairedLinears).

    Rows are read 16 bytes a lane when K % 16 == 0 and that still gives every lane a word;
    at least m * cols lanes (they finish the outputs), and the partial sums fit the
    workgroup memory (fewer columns otherwise)."""
    v = DECODE_VARIANTS[variant]
    vec4 = k % 16 == 0 and k // 16 >= v["lanes"]
    words = k // 16 if vec4 else k // 4
    cols = min(v["cols"], n)
    linears = 2 if paired else 1
    lanes = max(min(v["lanes"], words), m * cols)
    while cols > 1 and lanes * passes * m * cols * linears * 4 > WORKGROUP_BYTES:
        cols -= 1
        lanes = max(min(v["lanes"], words), m * cols)
    groups, row = L.grid(-(-n // cols), 1)
    kern = L.kernel("quantized/linear_q8_splitk", m=m, n=n, k=k, kw=k // 4, vec4=vec4,
                    lanes=lanes, cols=cols * linears, row=row,
                    dot4=use_dot4(L.features, hinted=False),
                    subgroups=SUBGROUPS_FEATURE in L.features,
                    enable_subgroups=SUBGROUPS_IMPLICIT not in L.features,
                    dual=passes == 2, paired=paired, **params)
    return kern, groups


def tiling(m: int, kw: int, variant: str = GPU_GEMM) -> dict[str, int]:
    """Workgroup shape (tx, ty), outputs per invocation (rm, rn) and words per K step (kt).

    Outputs of an invocation are strided by (ty, tx), so neighbours write neighbouring
    columns. Many rows: tiles from 8x8 invocations with GEMM_VARIANTS[variant] outputs each
    (64x64 for t8x8: each x and W word staged in workgroup memory serves 64 outputs, the
    fastest single-pass shape tried on lavapipe for 1024x768x3072); a direct variant
    (`direct`) has no tile in workgroup memory, each invocation reading its own words. Few
    rows (a decoder window): all rows in one tile, 256 columns.
    """
    if m <= 4:
        t = {"tx": 64, "ty": 1, "rm": m, "rn": 4, "kt": 8, "direct": 0}
    elif m <= 32:
        t = {"tx": 32, "ty": 8, "rm": -(-m // 8), "rn": 4, "kt": 8, "direct": 0}
    else:
        t = {"tx": 8, "ty": 8, **GEMM_VARIANTS[variant], "kt": 8}
        if t["direct"]:  # no more rows an invocation than the matrix has: a 64-row linear
            t["rm"] = min(t["rm"], -(-m // t["ty"]))  # in d16x16 would compute 64 clamped rows
    t["kt"] = min(t["kt"], kw)
    return t


def _parse(A, call):
    x, s, zp, w, sums, scales, bias, out = call.args
    return (x, A.float(s), A.int(zp), w, sums, scales, None if A.is_null(bias) else bias,
            out)


def _shapes(T, x, w, out):
    """(M, N, K) from x [..., K], W [N, K], out [..., N]; None when inconsistent."""
    tw, tx, to = T(w), T(x), T(out)
    if len(tw.dims) != 2 or not tx.dims or not to.dims:
        return None
    n, k = tw.dims
    if tx.dims[-1] != k or to.dims[-1] != n or tuple(tx.dims[:-1]) != tuple(to.dims[:-1]):
        return None
    return tx.numel // k if k else 0, n, k


def lower(L, call) -> None:
    x, s, zp, w, sums, scales, bias, out = _parse(L.args, call)
    shapes = _shapes(L.tensor, x, w, out)
    if shapes is None:
        raise L.unsupported(f"shapes x {list(L.tensor(x).dims)}, W {list(L.tensor(w).dims)}, "
                            f"out {list(L.tensor(out).dims)} are not x[..., K] W[N, K] "
                            f"-> out[..., N]")
    m, n, k = shapes
    if k % 4 or k == 0 or m == 0:
        raise L.unsupported(f"K = {k}, M = {m}: needs K a positive multiple of 4 and M > 0")
    x_kind = L.storage(x)
    if x_kind not in ("i8", "f32") or L.storage(w) != "i8" or L.storage(out) != "f32":
        raise L.unsupported(f"dtypes x {x_kind}, W {L.storage(w)}, out {L.storage(out)} "
                            "(needs int8 or float32 x, int8 W, float32 out)")
    per_channel = [(sums, "i32"), (scales, "f32")] + ([(bias, "f32")] if bias is not None
                                                     else [])
    for vid, kind in per_channel:
        if L.storage(vid) != kind or L.tensor(vid).numel < n:
            raise L.unsupported(f"per-channel value {vid} must be {kind} with >= {n} "
                                f"entries, is {L.storage(vid)} {list(L.tensor(vid).dims)}")
    if not -256 <= zp <= 255:
        raise L.unsupported(f"input zero point {zp} outside [-256, 255]")
    q = quantize_params(s, zp)
    # Only the tiles' portable path unpacks each word once (use_dot4).
    common = dict(m=m, n=n, k=k, kw=k // 4, dot4=use_dot4(L.features, m > SKINNY_ROWS),
                  x_float=x_kind == "f32", has_bias=bias is not None)
    variant = decode_variant(L.features)
    if m <= SKINNY_ROWS and variant.startswith("splitk"):
        kern, groups = splitk_kernel(L, variant, m, n, k, 1, x_float=x_kind == "f32",
                                     has_bias=bias is not None, biases=[bias is not None],
                                     add=None, epilogue=None, segments=None)
        x_loads, w_loads = math.prod(groups), 1
    elif m <= SKINNY_ROWS:
        # A decoder window: one column per invocation, W rows read directly.
        groups, row = L.grid(n, 64)
        x_loads, w_loads = n, 1
        # Rows of whole vec4<u32> (K % 16 == 0) are read 16 bytes at a time.
        kern = L.kernel("quantized/linear_q8_skinny", workgroup=64, row=row, vec4=k % 16 == 0,
                        **common)
    else:
        t = tiling(m, k // 4, gemm_variant(L.features))
        tile_m, tile_n = t["ty"] * t["rm"], t["tx"] * t["rn"]
        groups = (-(-n // tile_n), -(-m // tile_m), 1)
        if max(groups) > 65535:
            raise L.unsupported(f"{groups} workgroups exceed 65535 per dimension")
        kern = L.kernel("quantized/linear_q8", tile_m=tile_m, tile_n=tile_n, **common, **t)
        x_loads, w_loads = groups[0], groups[1]
    # Scales and zero points come from a params buffer: one pipeline per shape.
    params = L.params(f32(s), zp, *(q if x_kind == "f32" else ()))
    vids = [x, w, sums, scales] + ([bias] if bias is not None else [])
    L.dispatch(kern, [L.buf(v) for v in vids] + [params, L.buf(out)], groups,
               cost=linear_cost(m, n, k, 1, 4 if x_kind == "f32" else 1, len(per_channel),
                                x_loads=x_loads, w_loads=w_loads))


def linear_q8_reference(xq: np.ndarray, w: np.ndarray, sums: np.ndarray, scales: np.ndarray,
                        bias: np.ndarray | None, scale: float, zp: int) -> np.ndarray:
    """y (M, N) f32 from int8 xq (M, K) and W (N, K), with the kernel's arithmetic."""
    n = w.shape[0]
    acc = xq.astype(np.int64) @ w.astype(np.int64).T  # (M, N), exact
    adj = acc - np.int64(zp) * sums.reshape(-1)[:n].astype(np.int64)
    adj = ((adj + 2**31) % 2**32 - 2**31).astype(np.int32)  # i32 wrap, as on the GPU
    y = adj.astype(np.float32) * (np.float32(scale) * scales.reshape(-1)[:n].astype(np.float32))
    if bias is not None:
        y = y + bias.reshape(-1)[:n].astype(np.float32)
    return y


def reference(R, call) -> None:
    x, s, zp, w, sums, scales, bias, out = _parse(R.args, call)
    shapes = _shapes(R.args.tensor, x, w, out)
    if shapes is None:
        raise PlanError(f"{R.args.op_name}: shapes are not x[..., K] W[N, K] -> out[..., N]")
    m, n, k = shapes
    xv = R.get(x).reshape(m, k)
    if xv.dtype == np.float32:
        xv = quantize_reference(xv, quantize_params(s, zp))
    y = linear_q8_reference(xv, R.get(w), R.get(sums), R.get(scales),
                            None if bias is None else R.get(bias), s, zp)
    R.set(out, y.reshape(R.args.tensor(out).dims))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "T f i Tq T T T? T"})]
