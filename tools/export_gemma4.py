"""Export reduced Gemma 4 text decoders built from ExecuTorch's own model classes (dev-only:
needs torch + executorch 1.5.1; nothing under py/ imports this).

    python tools/export_gemma4.py [--out tests/fixtures/gemma4] [--only NAME ...]
    python tools/export_gemma4.py --model-folder DIR    # a tiny chat model folder

The model is `executorch.examples.models.gemma4_31b.model.Gemma4_31B` with a config shrunk from
the 31B schema but keeping its structure: 6 layers in the 5:1 sliding/full pattern, the q/kv head
ratios (2 on sliding, 8 on full layers) and the 1:2 head-dim ratio, partial rope (0.25) on the
full layer, K=V there, qk-norm, embed scale, tied head, final softcap; a sliding window of 8
(ring cache of 16 rows) so the reference sequence crosses the window and wraps the ring.
Weights are seeded random. `forward(tokens [1, T] int64, input_pos [T] int64) -> logits [1, V]`
is the model's own forward without the Gumbel sampling (logits of the last row).

Fixtures (each NAME.pte + NAME.npz with `call{i}_input_{j}` / `call{i}_output_{j}`):
- gemma4_stock: the stock modules through `WebGPUPartitioner()`: many delegates with portable
  kernel calls between them (RMSNorm's eps add, the boolean-mask SDPA decomposition, the
  ring-cache `index_put_` writes and `remainder`).
- gemma4_delegated: the same weights and maths written so everything delegates (Llama-style
  RMSNorm, explicit attention with an additive mask, floor division for the ring index, the
  cache write as a one-hot matmul), lowered with `alias_buffer_mutations`.
- gemma4_delegated_noalias: the same without that option: the delegate graph also lists the
  12 updated caches as outputs that its call does not pass.
- gemma4_q8: gemma4_delegated with every linear (the tied head too) as the SmolVLM decoder's
  two-pass int8 linear (tools/decoder_model.py), calibrated on the reference sequence.

The sequence: a 6-token prompt as two 4-row windows (0..3, 2..5: the last window overlaps and
rewrites rows 2, 3 with the same values) and then one new token per call, fed as the window
p-3..p, up to position 19 (past the 8-token window and the 16-row ring).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from executorch.backends.webgpu.partitioner import WebGPUPartitioner
from executorch.examples.models.gemma4_31b.model import Gemma4_31B, Gemma4_31BConfig
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from char_tokenizer import save_char_tokenizer  # noqa: E402
from export_fixtures import save_npz  # noqa: E402  (one deterministic npz writer for all fixtures)

ROWS = 4            # rows per call (the window)
PROMPT = 6          # prompt tokens
LAST_POS = 19       # last position fed
SEED = 2031
CHAT_CONTEXT = 128  # positions of the model folder's decoder: room for a few chat turns


def tiny_config(max_seq_len: int = 32) -> Gemma4_31BConfig:
    """The 31B schema shrunk: ratios kept, widths/depth/vocab/window small."""
    return Gemma4_31BConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
        num_attention_heads=8, num_key_value_heads=4, head_dim=16,
        num_global_key_value_heads=1, global_head_dim=32, attention_k_eq_v=True,
        full_partial_rotary_factor=0.25, rms_norm_eps=1e-6, final_logit_softcapping=30.0,
        tie_word_embeddings=True, sliding_window=8, max_seq_len=max_seq_len)


def build_stock(seed: int = SEED, max_seq_len: int = 32) -> Gemma4_31B:
    """Gemma4_31B with seeded random weights, norm weights near 1, tied head (the weights do
    not depend on `max_seq_len`)."""
    torch.manual_seed(seed)
    model = Gemma4_31B(tiny_config(max_seq_len)).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "lm_head" not in name:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
                        if p.dim() == 2 and "embed" not in name
                        else 0.5 * torch.randn(p.shape, generator=gen))
        for layer in model.layers:
            layer.layer_scalar.copy_(0.8 + 0.4 * torch.rand(1, generator=gen))
    model.lm_head.weight = model.embed_tokens.weight
    return model


class StockLogits(nn.Module):
    """Gemma4_31B.forward up to the soft-capped logits of the last row (no sampling)."""

    def __init__(self, model: Gemma4_31B):
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        m = self.model
        x = m.embed_tokens(tokens) * m.embed_normalizer
        sliding_mask, full_mask = m._build_masks(input_pos)
        for layer in m.layers:
            x = layer(x, input_pos, sliding_mask, full_mask)
        x = m.norm(x)
        last = m.lm_head(x[:, -1, :]).float()
        cap = m.logit_softcap.float()
        return torch.tanh(last / cap) * cap

    def caches(self) -> list[torch.Tensor]:
        return [c for layer in self.model.layers
                for c in (layer.self_attn.kv_cache.k_cache, layer.self_attn.kv_cache.v_cache)]


def _rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DelegatedLogits(nn.Module):
    """The stock model's maths on its weights, written so that every op delegates."""

    def __init__(self, model: Gemma4_31B):
        super().__init__()
        self.model = model
        cfg = model.config
        self.eps = cfg.rms_norm_eps
        self.window = cfg.sliding_window
        for i, layer in enumerate(model.layers):
            shape = layer.self_attn.kv_cache.k_cache.shape
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape), persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape), persistent=False)
        self.register_buffer("ring_slots", torch.arange(2 * cfg.sliding_window), persistent=False)

    def caches(self) -> list[torch.Tensor]:
        return [getattr(self, f"{kind}_cache_{i}") for i in range(len(self.model.layers))
                for kind in ("k", "v")]

    def _masks(self, input_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Additive (0 / -inf) forms of Gemma4_31B._build_masks."""
        q_pos = input_pos.unsqueeze(1)
        full = q_pos >= self.model.cache_positions.unsqueeze(0)
        buf = 2 * self.window
        j = self.ring_slots
        total = input_pos[0] + input_pos.shape[0]
        ring_pos = j + torch.div(total - 1 - j, buf, rounding_mode="floor") * buf
        delta = q_pos - ring_pos.unsqueeze(0)
        sliding = (ring_pos >= 0) & (delta >= 0) & (delta < self.window)
        zero = torch.zeros((), dtype=torch.float32)
        neg = torch.full((), float("-inf"))
        return torch.where(sliding, zero, neg), torch.where(full, zero, neg)

    def _write(self, cache: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """cache[:, :, slots[t]] = rows[:, :, t] as a one-hot matmul (slots are distinct)."""
        size = cache.shape[2]
        onehot = (slots.unsqueeze(1) == torch.arange(size).unsqueeze(0)).float()  # [T, S]
        # Rows kept: 1 - (times written). A matmul, as a sum over dim 0 does not delegate.
        keep = 1.0 - torch.matmul(onehot.t(), torch.ones(slots.shape[0], 1))
        new = cache * keep.view(1, 1, size, 1) + torch.matmul(onehot.t(), rows)
        cache.copy_(new)
        return new

    def _attention(self, i: int, x: torch.Tensor, input_pos: torch.Tensor,
                   mask: torch.Tensor) -> torch.Tensor:
        a = self.model.layers[i].self_attn
        B, T, _ = x.shape
        q = a.q_proj(x).view(B, T, a.n_heads, a.head_dim)
        raw_k = a.k_proj(x).view(B, T, a.n_kv_heads, a.head_dim)
        raw_v = raw_k if a.k_eq_v else a.v_proj(x).view(B, T, a.n_kv_heads, a.head_dim)
        q = _rms(q, a.q_norm.weight, self.eps).transpose(1, 2)
        k = _rms(raw_k, a.k_norm.weight, self.eps).transpose(1, 2)
        v = _rms(raw_v, None, self.eps).transpose(1, 2)
        freqs = input_pos.float().unsqueeze(1) * a.inv_freq.unsqueeze(0)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = torch.cos(emb), torch.sin(emb)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        size = getattr(self, f"k_cache_{i}").shape[2]
        slots = input_pos - torch.div(input_pos, size, rounding_mode="floor") * size
        k = self._write(getattr(self, f"k_cache_{i}"), slots, k)
        v = self._write(getattr(self, f"v_cache_{i}"), slots, v)
        rep = a.n_heads // a.n_kv_heads
        k = k.unsqueeze(2).expand(B, a.n_kv_heads, rep, size, a.head_dim).reshape(
            B, a.n_heads, size, a.head_dim)
        v = v.unsqueeze(2).expand(B, a.n_kv_heads, rep, size, a.head_dim).reshape(
            B, a.n_heads, size, a.head_dim)
        scores = torch.matmul(q, k.transpose(2, 3)) * a.scaling + mask
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return a.o_proj(y.transpose(1, 2).reshape(B, T, a.n_heads * a.head_dim))

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        m = self.model
        return self.decode(m.embed_tokens(tokens) * m.embed_normalizer, input_pos)

    def decode(self, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Logits of the last row from scaled embeddings `x` at positions `input_pos`."""
        m = self.model
        sliding_mask, full_mask = self._masks(input_pos)
        for i, layer in enumerate(m.layers):
            mask = sliding_mask if layer.is_sliding else full_mask
            h = self._attention(i, _rms(x, layer.input_layernorm.weight, self.eps),
                                input_pos, mask)
            x = x + _rms(h, layer.post_attention_layernorm.weight, self.eps)
            h = _rms(x, layer.pre_feedforward_layernorm.weight, self.eps)
            mlp = layer.mlp
            h = mlp.down_proj(F.gelu(mlp.gate_proj(h), approximate="tanh") * mlp.up_proj(h))
            x = x + _rms(h, layer.post_feedforward_layernorm.weight, self.eps)
            x = x * layer.layer_scalar
        x = _rms(x, m.norm.weight, self.eps)
        last = m.lm_head(x[:, -1, :])
        cap = m.logit_softcap
        return torch.tanh(last / cap) * cap


class ChatDecoder(DelegatedLogits):
    """The host contract of webpte's model folders: `(embeds [1, ROWS, hidden] f32 — rows of
    the int8 table times their scale, the embed scale folded in — , input_pos [1] i64 start)
    -> logits [1, V]`, positions input_pos .. input_pos + ROWS - 1."""

    def forward(self, embeds: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return self.decode(embeds, input_pos + torch.arange(ROWS))


# Gemma's turn format (tokenizer_config.json chat_template of the model folder).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n"
    "{% endif %}")
SPECIALS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]


def write_tokenizer(out: Path, vocab: int) -> None:
    """A character-level tokenizer (`tokenizers` BPE without merges) of `vocab` ids: Gemma's
    special tokens, then printable ASCII, then filler pieces."""
    save_char_tokenizer(out, vocab, SPECIALS)
    config = {"bos_token": "<bos>", "eos_token": "<eos>", "chat_template": CHAT_TEMPLATE}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}))


def write_model_folder(out: Path) -> None:
    """A tiny Gemma 4 model folder (webpte_model.json layout) around the delegated decoder."""
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    stock = build_stock(max_seq_len=CHAT_CONTEXT)
    cfg = stock.config
    module = ChatDecoder(stock).eval()
    example = (torch.zeros(1, ROWS, cfg.hidden_size), torch.tensor([0]))
    data, n_delegates, cpu = export_program(
        module, example, {"alias_buffer_mutations": True},
        constant_methods={"get_max_context_len": cfg.max_seq_len,
                          "get_vocab_size": cfg.vocab_size})
    (out / "decoder.pte").write_bytes(data)
    # Per-row symmetric int8 embeddings; the scale file carries Gemma's embed scale too.
    w = stock.embed_tokens.weight.detach()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.clamp(torch.round(w / scale[:, None]), -127, 127).to(torch.int8)
    (out / "embed_tokens.i8.bin").write_bytes(q.numpy().tobytes())
    (out / "embed_tokens.scale.f32.bin").write_bytes(
        (scale * float(stock.embed_normalizer)).to(torch.float32).numpy().tobytes())
    write_tokenizer(out / "tokenizer", cfg.vocab_size)
    meta = {"format": "webpte-model/1", "name": "gemma4-tiny-random",
            "decoder": "decoder.pte", "vision": None, "embed_tokens": "embed_tokens.i8.bin",
            "embed_scales": "embed_tokens.scale.f32.bin", "tokenizer": "tokenizer",
            "hidden_size": cfg.hidden_size, "sink_token": "<bos>",
            "stop_tokens": ["<end_of_turn>"],
            # The sliding layers' ring cache: the host's KV reuse must know which positions
            # a query sees (the window) and where each position's row lives (mod ring_rows).
            "sliding_window": cfg.sliding_window,
            "ring_rows": int(stock.layers[0].self_attn.kv_cache.k_cache.shape[2])}
    (out / "webpte_model.json").write_text(json.dumps(meta, indent=1))
    print(f"model folder {out}: {time.perf_counter() - t0:.1f} s, decoder {len(data)} B, "
          f"{n_delegates} delegates, {sum(cpu.values())} CPU kernel calls", flush=True)


def sequence(vocab: int, seed: int = SEED) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(tokens [1, ROWS], input_pos [ROWS]) per call: prompt windows, then one token a call."""
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (LAST_POS + 1,), generator=gen)
    starts = list(range(0, PROMPT - ROWS + 1, ROWS))
    if starts[-1] != PROMPT - ROWS:
        starts.append(PROMPT - ROWS)
    starts += [p - ROWS + 1 for p in range(PROMPT, LAST_POS + 1)]
    return [(ids[s:s + ROWS].view(1, ROWS), torch.arange(s, s + ROWS)) for s in starts]


def eager_calls(module: nn.Module, calls) -> list[torch.Tensor]:
    for c in module.caches():
        c.zero_()
    with torch.no_grad():
        outs = [module(*c).clone() for c in calls]
    for c in module.caches():
        c.zero_()
    return outs


def export_program(module: nn.Module, example, compile_options: dict | None,
                   constant_methods: dict | None = None):
    # Without this the portable index_put_/copy_ of the stock caches fail in to_executorch
    # ("a leaf Variable that requires grad is being used in an in-place operation").
    for p in module.parameters():
        p.requires_grad_(False)
    ep = torch.export.export(module, example, strict=False)
    edge = to_edge_transform_and_lower(
        ep, partitioner=[WebGPUPartitioner(compile_options=compile_options)],
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
        constant_methods=constant_methods)
    program = edge.to_executorch(ExecutorchBackendConfig())
    plan = program.executorch_program.execution_plan[0]
    cpu: Counter = Counter()
    for chain in plan.chains:
        for ins in chain.instructions:
            if hasattr(ins.instr_args, "op_index"):
                op = plan.operators[ins.instr_args.op_index]
                cpu[op.name + ("." + op.overload if op.overload else "")] += 1
    return program.buffer, len(plan.delegates), cpu


def delegate_histogram(data: bytes) -> Counter:
    """Op names of every VK00 graph, read with webpte's own reader (executorch's JSON round
    trip of a VK00 graph fails on the -inf of an additive mask)."""
    from webpte.pte import read_program

    hist: Counter = Counter()
    for method in read_program(data).methods.values():
        for graph in method.graphs.values():
            hist.update(op.name for op in graph.chain)
    return hist


def quantize_q8(module: nn.Module, calls) -> nn.Module:
    """Every nn.Linear (the tied head too) -> tools/decoder_model.py's two-pass int8 linear,
    its two activation ranges observed on the f32 module over the reference sequence."""
    from decoder_model import QMAX, QMIN, TwoPassQ8Linear, affine_qparams

    linears = {n: m for n, m in module.named_modules() if isinstance(m, nn.Linear)}

    def observe(value_of) -> dict[str, tuple[float, int]]:
        ranges: dict[str, tuple[float, float]] = {}

        def hook(name):
            def fn(_mod, args):
                v = value_of(name, args[0])
                lo, hi = float(v.min()), float(v.max())
                old = ranges.get(name, (lo, hi))
                ranges[name] = (min(old[0], lo), max(old[1], hi))
            return fn

        hooks = [lin.register_forward_pre_hook(hook(n)) for n, lin in linears.items()]
        eager_calls(module, calls)
        for h in hooks:
            h.remove()
        return {n: affine_qparams(*r) for n, r in ranges.items()}

    pass1 = observe(lambda n, x: x)

    def rounding_error(name, x):
        sc, z = pass1[name]
        return x - (torch.clamp(torch.round(x * (1.0 / sc)) + z, QMIN, QMAX) - z) * sc

    pass2 = observe(rounding_error)
    for name, lin in linears.items():
        parent, _, attr = name.rpartition(".")
        setattr(module.get_submodule(parent), attr, TwoPassQ8Linear(lin, pass1[name], pass2[name]))
    return module


def _delegated_q8(model: Gemma4_31B) -> nn.Module:
    module = DelegatedLogits(model).eval()
    return quantize_q8(module, sequence(model.config.vocab_size))


FIXTURES = {
    "gemma4_stock": (StockLogits, None),
    "gemma4_delegated": (DelegatedLogits, {"alias_buffer_mutations": True}),
    # The same without aliasing: the delegate graph also lists the updated caches as outputs
    # that the delegate call does not pass.
    "gemma4_delegated_noalias": (DelegatedLogits, None),
    # Two-pass int8 linears (the SmolVLM decoder's recipe) in the delegated program.
    "gemma4_q8": (_delegated_q8, {"alias_buffer_mutations": True}),
}


def write_fixture(out: Path, name: str) -> None:
    t0 = time.perf_counter()
    make, options = FIXTURES[name]
    if name == "gemma4_q8":
        from decoder_model import register_linear_q8ta_q8csw_meta

        register_linear_q8ta_q8csw_meta()
    module = make(build_stock()).eval()
    calls = sequence(module.model.config.vocab_size)
    outs = eager_calls(module, calls)
    data, n_delegates, cpu = export_program(module, calls[0], options)
    (out / f"{name}.pte").write_bytes(data)
    eager_again = eager_calls(module, calls)
    if any(not torch.equal(a, b) for a, b in zip(outs, eager_again)):
        raise RuntimeError(f"{name}: eager outputs changed across export")
    arrays: dict[str, np.ndarray] = {}
    for i, ((tokens, pos), logits) in enumerate(zip(calls, outs)):
        arrays[f"call{i}_input_0"] = tokens.numpy()
        arrays[f"call{i}_input_1"] = pos.numpy()
        arrays[f"call{i}_output_0"] = logits.numpy()
    save_npz(out / f"{name}.npz", arrays)
    print(f"{name}: {time.perf_counter() - t0:.1f} s, pte {len(data)} B, {n_delegates} "
          f"delegates, {sum(cpu.values())} CPU kernel calls {dict(cpu)}", flush=True)
    hist = delegate_histogram(data)
    print("  delegated ops: " + ", ".join(f"{k} {v}" for k, v in sorted(hist.items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/gemma4"))
    ap.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    ap.add_argument("--model-folder", type=Path, help="write a tiny Gemma 4 model folder "
                    "(webpte_model.json, decoder.pte, int8 embeddings, tokenizer/) instead")
    args = ap.parse_args(argv)
    if args.model_folder:
        write_model_folder(args.model_folder)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or FIXTURES:
        write_fixture(args.out, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
