"""Export a reduced Gemma 4 vision encoder the way ExecuTorch's own Gemma 4 exporter does
(dev-only: needs torch, executorch 1.5.1 and a transformers with `models/gemma4`, the export
extra's 5.24.0; nothing under py/ imports this).

    python tools/export_gemma4_vision.py [--out tests/fixtures/gemma4_vision] [--only NAME ...]

The module is ExecuTorch's `_HFVisionEncoderWithProjection` (executorch 1.5.1,
`examples/models/gemma4/export_gemma4.py`) around HF transformers' `Gemma4VisionModel` and
`Gemma4MultimodalEmbedder`, prepared as ExecuTorch's `_export_vision_encoder` prepares it (the
position table as int8 per channel, looked up by a one-hot matmul), exported with static
shapes. The config is the 31B schema's vision encoder shrunk but keeping its structure: 2-D
axial rope theta 100 over the patch positions, head_dim 12 of width 48 (72 of 1152: 4 heads
instead of 16), per-head qk-norm (parameter-free on v), gated gelu_tanh FFN (180: the
4304/1152 ratio, a multiple of 4 as 4304 is; ExecuTorch 1.5.1's Vulkan int8 linear fusion
fails on other widths), pre+post RMSNorm eps 1e-6, the 3x3 position pooler with its
sqrt(width) scale, and the projector `embed_vision` into the width (64) of the reduced Gemma 4
decoder of tools/export_gemma4.py. Attention is HF's SDPA path, the default of a model loaded
with `from_pretrained` as ExecuTorch loads it. Weights are seeded random.

`forward(pixel_values [1, 36, 192] f32, pixel_position_ids [1, 36, 2] i64) ->
(embeddings [1, 4, 64] f32, mask [1, 4] bool)`: 36 patches of 8x8 RGB pixels in [0, 1], their
(x, y) positions, (-1, -1) for padding; 4 soft tokens (each a 3x3 patch cell), mask False for a
token with no patch.

Fixtures (NAME.pte + NAME.npz with `call{i}_input_{j}` / `call{i}_output_{j}`):
- gemma4_vision_stock: the module through `WebGPUPartitioner()`: several delegates with
  portable kernel calls between them (the padding `any`, the pooler's `max.dim`, the mask's
  `index.Tensor`, SDPA's scalar multiplies, ...).
- gemma4_vision_q8: the same with every linear (the patch and output projections too) as the
  SmolVLM decoder's two-pass int8 linear (tools/decoder_model.py), calibrated on the
  reference calls.
- gemma4_vision_delegated: the stock module's maths on its weights written so that everything
  delegates (one delegate, no kernel calls): the padding test as two compares, the position
  lookup and the pooler's cell weights as compares against index constants, explicit attention
  with an additive mask, the pooler's width as amax and its mask as a matmul count. Its
  reference outputs are the stock module's (the rewrite's own eager outputs are checked to
  match them to 1e-6 first).

The calls: four images of different patch grids (6x3 and 3x9 padded, 6x6 and 12x3 full).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from executorch.examples.models.gemma4.export_gemma4 import (
    _HFVisionEncoderWithProjection,
    _quantize_position_embedding_table,
)
from torch import nn
from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig, Gemma4VisionConfig
from transformers.models.gemma4.modeling_gemma4 import (
    Gemma4MultimodalEmbedder,
    Gemma4VisionModel,
    apply_multidimensional_rope,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from export_gemma4 import (  # noqa: E402
    delegate_histogram,
    export_program,
    quantize_q8,
    save_npz,
    tiny_config,
)

SEED = 2032
PATCH = 8            # patch side (the schema's 16): 3 * 8 * 8 = 192 values a patch
PATCHES = 36         # patches per call: 4 soft tokens of 3 x 3
GRIDS = [(6, 3), (6, 6), (3, 9), (12, 3)]   # (width, height) in patches of each call


def vision_config() -> Gemma4VisionConfig:
    """The 31B schema's vision encoder shrunk: ratios kept, width/depth/patches small."""
    cfg = Gemma4VisionConfig(
        hidden_size=48, intermediate_size=180, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=12, rms_norm_eps=1e-6, patch_size=PATCH,
        position_embedding_size=16, pooling_kernel_size=3,
        rope_parameters={"rope_type": "axial", "rope_theta": 100.0})
    cfg._attn_implementation = "sdpa"
    return cfg


def build_stock(seed: int = SEED) -> nn.Module:
    """Seeded random weights (norm weights near 1), then ExecuTorch's int8 position table."""
    torch.manual_seed(seed)
    cfg = vision_config()
    tower = Gemma4VisionModel(cfg).eval()
    embed = Gemma4MultimodalEmbedder(cfg, Gemma4TextConfig(hidden_size=tiny_config().hidden_size))
    module = _HFVisionEncoderWithProjection(tower, embed.eval()).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "position_embedding_table" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
    _quantize_position_embedding_table(module)
    return module.eval()


def sequence(seed: int = SEED) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(pixel_values [1, PATCHES, 3*PATCH*PATCH], positions [1, PATCHES, 2]) per call: the
    grid's patches row by row, then padding (zero pixels, position (-1, -1))."""
    gen = torch.Generator().manual_seed(seed + 1)
    calls = []
    for w, h in GRIDS:
        pixels = torch.zeros(1, PATCHES, 3 * PATCH * PATCH)
        pixels[0, :w * h] = torch.rand(w * h, 3 * PATCH * PATCH, generator=gen)
        pos = torch.full((1, PATCHES, 2), -1, dtype=torch.int64)
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        pos[0, :w * h, 0], pos[0, :w * h, 1] = xs.reshape(-1), ys.reshape(-1)
        calls.append((pixels, pos))
    return calls


def eager(module: nn.Module, calls) -> list[tuple[torch.Tensor, ...]]:
    with torch.no_grad():
        return [tuple(o.clone() for o in module(*c)) for c in calls]


class _Embeddings(nn.Module):
    """The encoder's embeddings alone, no caches: what export_gemma4's calibration runs."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, pixels: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.encoder(pixels, positions)[0]

    def caches(self) -> list[torch.Tensor]:
        return []


class _PatchProjection(nn.Module):
    """HF's patch embedder casts the pixels to `input_proj.weight.dtype`, which a two-pass
    int8 linear does not have: this one says float32 (its weight scales' dtype)."""

    def __init__(self, q8: nn.Module):
        super().__init__()
        self.q8 = q8

    @property
    def weight(self) -> torch.Tensor:
        return self.q8.weight_scales

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q8(x)


def _q8(module: nn.Module) -> nn.Module:
    """Every linear (the patch and output projections too) as the two-pass int8 linear,
    swapped in place, calibrated on the reference calls."""
    quantize_q8(_Embeddings(module), sequence())
    module.patch_embedder.input_proj = _PatchProjection(module.patch_embedder.input_proj)
    return module


class DelegatedVision(nn.Module):
    """_HFVisionEncoderWithProjection's maths on the stock module's weights, with every op in
    a form the WebGPU partitioner delegates. What the stock ops become on the CPU and what
    replaces them: F.one_hot (`any` + asserts) -> compares against index constants; the
    `(ids == -1).all(-1)` padding test (`any.dims`) -> two compares and an `and`; `where` /
    `masked_fill` with a Python 0.0 (`scalar_tensor`) -> a multiply by the keep mask; the
    boolean-mask SDPA and HF's bidirectional mask (`index.Tensor`, `any`, `mul.Scalar`) ->
    explicit attention plus an additive 0 / -inf key mask; the pooler's `max.dim` over int
    positions -> amax over the (exact) float positions; its `(w == 0).all(1)` mask and the
    lookup's sum over the two axes -> a matmul count and an add."""

    def __init__(self, stock: nn.Module):
        super().__init__()
        if stock.standardize:
            raise ValueError("the rewrite covers the config without standardize")
        self.stock = stock
        pe = stock.patch_embedder
        self.register_buffer("table_ids", torch.arange(pe._pet_int8.shape[1]), persistent=False)
        # The int8 table dequantized once, as the stock forward does per call (the same f32
        # values): the delegate has no int8 -> f32 cast, so that cast ran on the CPU.
        self.register_buffer("pos_table", pe._pet_int8.float() * pe._pet_scale, persistent=False)

    def _position_embeddings(self, clamped: torch.Tensor) -> torch.Tensor:
        table = self.pos_table                                             # [2, P, C]
        onehot = (clamped.unsqueeze(-1) == self.table_ids).float()        # [B, N, 2, P]
        return onehot[:, :, 0] @ table[0] + onehot[:, :, 1] @ table[1]

    def _attention(self, a: nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   positions: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape
        shape = (B, N, -1, a.head_dim)
        q = apply_multidimensional_rope(a.q_norm(a.q_proj(x).view(shape)), cos, sin, positions)
        k = apply_multidimensional_rope(a.k_norm(a.k_proj(x).view(shape)), cos, sin, positions)
        v = a.v_norm(a.v_proj(x).view(shape))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if a.num_key_value_groups != 1:
            raise ValueError("the rewrite covers equal q and kv head counts")
        scores = torch.matmul(q, k.transpose(2, 3)) * a.scaling + key_mask
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return a.o_proj(y.transpose(1, 2).reshape(B, N, -1))

    def forward(self, pixel_values: torch.Tensor,
                pixel_position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.stock
        k = s.pooling_kernel_size
        length = pixel_values.shape[1] // (k * k)
        pos = pixel_position_ids
        padding = (pos[..., 0] == -1) & (pos[..., 1] == -1)                # [B, N]
        keep = (~padding).float().unsqueeze(-1)                            # [B, N, 1]
        clamped = pos.clamp(min=0)
        pe = s.patch_embedder
        h = pe.input_proj(2 * (pixel_values - 0.5)) + self._position_embeddings(clamped) * keep
        cos, sin = s.encoder.rotary_emb(h, pos)
        zero, neg = torch.zeros(()), torch.full((), float("-inf"))
        key_mask = torch.where(padding, neg, zero).unsqueeze(1).unsqueeze(1)   # [B, 1, 1, N]
        for layer in s.encoder.layers:
            r = layer.post_attention_layernorm(self._attention(
                layer.self_attn, layer.input_layernorm(h), cos, sin, pos, key_mask))
            h = h + r
            h = h + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(h)))
        # The pooler: each patch's k x k cell, its weight 1 / k^2 (positions are exact in f32).
        h = h * keep
        cf = clamped.float()
        max_x = torch.amax(cf[..., 0], dim=-1, keepdim=True) + 1
        cells = torch.div(cf, k, rounding_mode="floor")
        cell = cells[..., 0] + torch.div(max_x, k, rounding_mode="floor") * cells[..., 1]
        token_ids = torch.arange(length, dtype=torch.float32)
        weights = (cell.unsqueeze(-1) == token_ids).float() / (k * k)     # [B, N, length]
        pooled = weights.transpose(1, 2) @ h * s.pooler.root_hidden_size
        mask = (weights.transpose(1, 2) @ torch.ones(pixel_values.shape[1], 1)).squeeze(-1) > 0
        return s.embed_vision(pooled), mask


FIXTURES = {"gemma4_vision_stock": lambda m: m, "gemma4_vision_q8": _q8,
            "gemma4_vision_delegated": DelegatedVision}


def write_fixture(out: Path, name: str) -> None:
    t0 = time.perf_counter()
    if name == "gemma4_vision_q8":
        from decoder_model import register_linear_q8ta_q8csw_meta

        register_linear_q8ta_q8csw_meta()
    module = FIXTURES[name](build_stock()).eval()
    calls = sequence()
    outs = eager(module, calls)
    if name == "gemma4_vision_delegated":
        # The reference is the stock module's outputs; the rewrite must agree with them.
        stock_outs = eager(build_stock(), calls)
        for i, ((got, got_mask), (want, want_mask)) in enumerate(zip(outs, stock_outs)):
            err = float((got - want).norm() / want.norm())
            if err > 1e-6 or not torch.equal(got_mask, want_mask):
                raise RuntimeError(f"{name} call {i}: rewrite vs stock rel-L2 {err:.1e}, "
                                   f"mask {got_mask.tolist()} vs {want_mask.tolist()}")
            print(f"  call {i}: rewrite vs stock eager rel-L2 {err:.1e}")
        outs = stock_outs
    data, n_delegates, cpu = export_program(module, calls[0], None)
    (out / f"{name}.pte").write_bytes(data)
    arrays: dict[str, np.ndarray] = {}
    for i, (inputs, outputs) in enumerate(zip(calls, outs)):
        for j, t in enumerate(inputs):
            arrays[f"call{i}_input_{j}"] = t.numpy()
        for j, t in enumerate(outputs):
            arrays[f"call{i}_output_{j}"] = t.numpy()
    save_npz(out / f"{name}.npz", arrays)
    print(f"{name}: {time.perf_counter() - t0:.1f} s, pte {len(data)} B, {n_delegates} "
          f"delegates, {sum(cpu.values())} CPU kernel calls {dict(cpu)}", flush=True)
    hist = delegate_histogram(data)
    print("  delegated ops: " + ", ".join(f"{k} {v}" for k, v in sorted(hist.items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/gemma4_vision"))
    ap.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or FIXTURES:
        write_fixture(args.out, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
