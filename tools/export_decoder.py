"""Export the SmolVLM-style windowed decoder fixtures (dev-only: needs torch + executorch 1.5.1).

    python tools/export_decoder.py [--out tests/fixtures] [--only NAME] [--full DIR]

Writes NAME.pte (WebGPUPartitioner, one VK00 delegate) and NAME.npz: a sequence of calls run on
the eager module with its KV cache carried across calls (`call{i}_input_0` embeds (1, 4, dim) f32,
`call{i}_input_1` input_pos (1,) int64, `call{i}_output_0` logits (1, vocab) f32) and the eager
caches after the last call (`final_k_cache_{layer}`, `final_v_cache_{layer}`, (1, ctx, Hkv, D)).

Committed: decoder_q8_tiny (two-pass int8 linears) and decoder_f32_tiny (same weights and sink,
f32 linears); decoder_{q8,f32}_gemma3_tiny, the same with Gemma 3's layer. `--full DIR` writes
decoder_q8_smolvlm_random (367 MB, ~25 min on 2 busy cores).
Exports are byte-reproducible. Each export prints the delegate op histogram next to the
published smolvlm_decoder_q8.pte's, scaled to the layer count.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
    extract_vk_flatbuffer,
    flatbuffer_to_vk_graph,
)
from executorch.backends.webgpu.partitioner import WebGPUPartitioner
from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.extension.llm.export.builder import DType, LLMEdgeManager

from decoder_model import (
    QUANTS,
    REAL_SIZE,
    SMOLVLM,
    TINY,
    DecoderConfig,
    WindowedDecoder,
    build_decoder,
    real_size,
    register_linear_q8ta_q8csw_meta,
)

TINY_GEMMA3 = replace(TINY, gemma=True, qk_norm=True)  # Gemma 3's layer (gemma3_block)
FIXTURES = {
    "decoder_q8_tiny": TINY,
    "decoder_f32_tiny": replace(TINY, q8=False),
    "decoder_q8_gemma3_tiny": TINY_GEMMA3,
    "decoder_f32_gemma3_tiny": replace(TINY_GEMMA3, q8=False),
}
FULL_NAME = "decoder_q8_smolvlm_random"

# The published smolvlm_decoder_q8.pte histogram (32 layers) split as 32 * per_layer + outside
# (outside: lm head linear, final norm, last-row select, rope/cache-start symints, rope tables).
# The split is inferred from the totals, which it reproduces exactly.
PUBLISHED_LAYERS = 32
PUBLISHED_PER_LAYER = {
    "aten._to_copy.default": (15, 2),
    "aten.add.Tensor": (18, 2),
    "aten.clamp.default": (7, 1),
    "aten.clone.default": (14, 2),
    "aten.mul.Tensor": (19, 2),
    "aten.relu.default": (1, 0),
    "aten.round.default": (7, 1),
    "aten.select_copy.int": (0, 1),
    "aten.sigmoid.default": (1, 0),
    "aten.sub.Tensor": (17, 2),
    "aten.view_copy.default": (5, 0),
    "et_vk.apply_rotary_emb_hf.default": (1, 0),
    "et_vk.linear_q8ta_q8csw.default": (14, 2),
    "et_vk.prepack.default": (32, 6),
    "et_vk.rms_norm.default": (2, 1),
    "et_vk.select_as_symint.default": (0, 2),
    "quantized_decomposed.quantize_per_tensor.default": (14, 2),
    "sdpa_with_kv_cache.default": (1, 0),
}

_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", flush=True)


def reference_windows(
    config: DecoderConfig, prompt_rows: int = 11, new_tokens: int = 3, seed: int = 12
):
    """The reference call sequence: prefill windows from 0 (the last one overlapping), single-token
    windows p-3..p for new positions p, then one window at ctx - window (rows in between stay
    unwritten, i.e. zero, in the cache).

    Rows are seeded random per position (a rewritten position sees the same row). Seed 12 gives
    every call of both tiny fixtures a top-1/top-2 logit gap >= 0.037, so greedy-token checks
    are not decided by rounding noise."""
    w, ctx = config.window, config.max_context_len
    rows = torch.randn(ctx, config.dim, generator=torch.Generator().manual_seed(seed))
    starts = list(range(0, prompt_rows - w + 1, w))
    if starts[-1] != prompt_rows - w:
        starts.append(prompt_rows - w)
    starts += [p - w + 1 for p in range(prompt_rows, prompt_rows + new_tokens)]
    starts.append(ctx - w)
    return [(rows[s : s + w][None].clone(), torch.tensor([s], dtype=torch.int64)) for s in starts]


def write_reference(model: WindowedDecoder, path: Path) -> int:
    windows = reference_windows(model.config)
    model.reset_caches()
    outputs = model.run(windows)
    arrays = {}
    for i, ((embeds, pos), logits) in enumerate(zip(windows, outputs)):
        arrays[f"call{i}_input_0"] = embeds.numpy().astype(np.float32)
        arrays[f"call{i}_input_1"] = pos.numpy().astype(np.int64)
        arrays[f"call{i}_output_0"] = logits.numpy().astype(np.float32)
    for layer, (k, v) in enumerate(model.caches()):
        arrays[f"final_k_cache_{layer}"] = k.numpy().copy()
        arrays[f"final_v_cache_{layer}"] = v.numpy().copy()
    model.reset_caches()
    np.savez_compressed(path, **arrays)
    return len(windows)


def constant_methods(config: DecoderConfig) -> dict:
    # Same set and meaning as the published program; its shapes are static, hence
    # enable_dynamic_shape False (LLMEdgeManager adds get_max_seq_len = window + 1).
    return {
        "get_max_context_len": config.max_context_len,
        "get_n_layers": config.n_layers,
        "get_vocab_size": config.vocab_size,
        "use_kv_cache": True,
        "use_sdpa_with_kv_cache": True,
        "enable_dynamic_shape": False,
    }


def export_program(model: WindowedDecoder, name: str, path: Path):
    """LLMEdgeManager flow: export, redundant-transpose removal, edge, WebGPU lowering, .pte."""
    config = model.config
    example = (torch.randn(1, config.window, config.dim), torch.tensor([0], dtype=torch.int64))
    manager = LLMEdgeManager(
        model=model,
        modelname=name,
        max_seq_len=config.window + 1,
        use_kv_cache=True,
        example_inputs=example,
        dtype=DType.fp32,
        enable_dynamic_shape=False,
        metadata=constant_methods(config),
    )
    model.reset_caches()
    manager.export()
    manager.run_canonical_optimizations()
    log(f"{name}: torch.export done")
    manager.export_to_edge()
    log(f"{name}: edge done")
    manager.to_backend([WebGPUPartitioner()])
    log(f"{name}: lowered")
    manager.to_executorch()
    model.reset_caches()
    path.write_bytes(manager.export_program.buffer)
    return manager.export_program


def inspect_program(data: bytes) -> dict:
    """Delegated op histogram, CPU kernel calls, graph input order, constant methods of a .pte."""
    program = deserialize_pte_binary(data).program  # delegate blobs restored inline
    plans = {p.name: p for p in program.execution_plan}
    forward = plans["forward"]
    instr_kinds = collections.Counter(
        type(ins.instr_args).__name__ for ch in forward.chains for ins in ch.instructions
    )
    histogram: collections.Counter = collections.Counter()
    input_orders = []
    for delegate in forward.delegates:
        blob = bytes(program.backend_delegate_data[delegate.processed.index].data)
        graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(blob))
        histogram.update(op.name for op in graph.chain)
        input_orders.append([_describe_value(graph, i) for i in graph.input_ids])
    consts = {}
    for name, plan in plans.items():
        if name != "forward":
            val = plan.values[0].val
            consts[name] = val.int_val if hasattr(val, "int_val") else val.bool_val
    return {
        "histogram": histogram,
        "kernel_calls": [op.name for op in forward.operators],
        "instructions": instr_kinds,
        "delegates": len(forward.delegates),
        "graph_inputs": input_orders,
        "method_inputs": [_describe_evalue(forward.values[i].val) for i in forward.inputs],
        "constant_methods": consts,
    }


def _describe_value(graph, vid: int) -> str:
    v = graph.values[vid].value
    dims = list(getattr(v, "dims", []))
    return f"v{vid}:{type(v).__name__}{dims}:{getattr(v, 'datatype', '')}"


def _describe_evalue(val) -> str:
    return (
        f"{type(val).__name__}{list(getattr(val, 'sizes', []))}:{getattr(val, 'scalar_type', '')}"
    )


def export_one(name: str, config: DecoderConfig, out_dir: Path) -> dict:
    t = time.perf_counter()
    model = build_decoder(config)
    quant = "q8" if config.q8 else (config.q4 or "f32")
    log(f"{name}: built ({quant}, {config.n_layers} layers)")
    n_calls = write_reference(model, out_dir / f"{name}.npz")
    log(f"{name}: reference, {n_calls} calls")
    export_program(model, name, out_dir / f"{name}.pte")
    info = inspect_program((out_dir / f"{name}.pte").read_bytes())
    info["seconds"] = time.perf_counter() - t
    info["bytes"] = {ext: (out_dir / f"{name}.{ext}").stat().st_size for ext in ("pte", "npz")}
    log(f"{name}: wrote {info['bytes']} in {info['seconds']:.1f}s")
    report(name, config, info)
    return info


def report(name: str, config: DecoderConfig, info: dict) -> None:
    print(f"--- {name}")
    print(
        f"  delegates {info['delegates']}, instructions {dict(info['instructions'])}, "
        f"CPU kernels {info['kernel_calls']}"
    )
    print(f"  method inputs {info['method_inputs']}")
    print(f"  graph input_ids {info['graph_inputs']}")
    print(f"  constant methods {info['constant_methods']}")
    if not config.q8:  # f32 or 4-bit linears: not comparable with the published q8 program
        for op, n in sorted(info["histogram"].items()):
            print(f"  {op:50s} {n:6d}")
        return
    print(f"  {'op':50s} {'count':>6s} {'expected':>8s}  published: per layer + outside")
    for op in sorted(set(info["histogram"]) | set(PUBLISHED_PER_LAYER)):
        n = info["histogram"].get(op, 0)
        per_layer, outside = PUBLISHED_PER_LAYER.get(op, (0, 0))
        expected = config.n_layers * per_layer + outside
        flag = "" if n == expected else "  <- differs"
        print(f"  {op:50s} {n:6d} {expected:8d}  {per_layer:3d} + {outside}{flag}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures"))
    parser.add_argument(
        "--only", choices=sorted(FIXTURES), help="export just this committed fixture"
    )
    parser.add_argument(
        "--full",
        type=Path,
        metavar="DIR",
        help="export the full SmolVLM-shaped random-weight decoder into DIR instead of the "
        "committed fixtures (with --only, that fixture as well)",
    )
    parser.add_argument(
        "--real-size", choices=sorted(REAL_SIZE), metavar="SHAPE",
        help=f"export a real-size shape ({', '.join(sorted(REAL_SIZE))}) into --out instead "
        "of the committed fixtures, as SHAPE_LAYERSl_QUANT",
    )
    parser.add_argument("--quant", choices=QUANTS, default="q8",
                        help="with --real-size: two-pass int8 linears (q8), 4-bit weight-only "
                        "group-wise (w4: linear_q4gsw) or 8da4w (linear_dq8ca_q4gsw)")
    parser.add_argument("--layers", type=int, default=None,
                        help="with --real-size: this many layers (default: the model's)")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    register_linear_q8ta_q8csw_meta()
    torch.manual_seed(0)

    if args.real_size:
        config = real_size(args.real_size, args.layers, args.quant)
        args.out.mkdir(parents=True, exist_ok=True)
        export_one(f"{args.real_size}_{config.n_layers}l_{args.quant}", config, args.out)
        return 0
    names = [args.only] if args.only else list(FIXTURES)
    if args.full and not args.only:
        names = []
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        export_one(name, FIXTURES[name], args.out)
    if args.full:
        args.full.mkdir(parents=True, exist_ok=True)
        export_one(FULL_NAME, SMOLVLM, args.full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
