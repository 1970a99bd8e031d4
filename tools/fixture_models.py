"""Torch modules behind the webpte test fixtures (dev-only: imports torch).

Small SmolVLM-style building blocks: the recipe's two-pass q8 linear, a SigLIP/Idefics3
pre-norm encoder layer with eager attention, and the vision tower with its pixel-shuffle
connector. Used only by tools/export_fixtures.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

QMIN, QMAX = -128, 127


def _affine_qparams(lo: float, hi: float) -> tuple[float, int]:
    """Static int8 affine (scale, zero point) of a min/max observer; the range always holds 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = float(torch.tensor(max(hi - lo, 1e-12) / (QMAX - QMIN), dtype=torch.float32))
    zero_point = int(min(max(QMIN - round(lo / scale), QMIN), QMAX))
    return scale, zero_point


def _fake_quant(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    """dequantize(quantize_per_tensor(x)) written with plain ops, as pass two consumes it."""
    q = torch.clamp(torch.round(x * (1.0 / scale)) + zero_point, QMIN, QMAX)
    return (q - zero_point) * scale


class Q8Linear(nn.Module):
    """The recipe's two-pass q8 linear.

    Pass one quantizes x with a static per-tensor (s1, z1); pass two quantizes pass one's
    rounding error with (s2, z2). Both passes multiply by the same int8 per-output-channel
    symmetric weight (scale amax/127.5); the outputs are summed, bias only in pass one.
    The Vulkan quantized-linear pattern lowers each pass to et_vk.linear_q8ta_q8csw.
    """

    def __init__(self, linear: nn.Linear, x_range: tuple[float, float],
                 err_range: tuple[float, float]) -> None:
        super().__init__()
        w = linear.weight.detach().float()  # (N, K)
        scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.5  # (N,)
        self.register_buffer("weight_q", torch.clamp(torch.round(w / scale[:, None]),
                                                     QMIN, QMAX).to(torch.int8))
        self.register_buffer("weight_scale", scale)
        self.register_buffer("weight_zero", torch.zeros(w.shape[0], dtype=torch.int64))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        self.s1, self.z1 = _affine_qparams(*x_range)
        self.s2, self.z2 = _affine_qparams(*err_range)

    def _qdq(self, x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor(x, scale, zero_point, QMIN, QMAX, torch.int8)
        return qd.dequantize_per_tensor(q, scale, zero_point, QMIN, QMAX, torch.int8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.ops.quantized_decomposed.dequantize_per_channel(
            self.weight_q, self.weight_scale, self.weight_zero, 0, QMIN, QMAX, torch.int8)
        y1 = F.linear(self._qdq(x, self.s1, self.z1), w, self.bias)
        err = x - _fake_quant(x, self.s1, self.z1)
        y2 = F.linear(self._qdq(err, self.s2, self.z2), w)
        return y1 + y2


def _observe_ranges(model: nn.Module, batches: list[tuple[torch.Tensor, ...]],
                    value) -> dict[str, tuple[float, float]]:
    """Min/max observer of value(name, x) over every nn.Linear input x of `model`."""
    ranges: dict[str, tuple[float, float]] = {}

    def hook(name):
        def fn(_mod, args):
            t = value(name, args[0])
            lo, hi = float(t.min()), float(t.max())
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
        return fn

    handles = [m.register_forward_pre_hook(hook(n))
               for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    try:
        with torch.no_grad():
            for batch in batches:
                model(*batch)
    finally:
        for h in handles:
            h.remove()
    return ranges


def quantize_linears_q8(model: nn.Module, calibration: list[tuple[torch.Tensor, ...]]) -> nn.Module:
    """Replace every nn.Linear of `model` (in place) by a Q8Linear calibrated on `calibration`."""
    x_range = _observe_ranges(model, calibration, lambda _n, x: x)
    err_range = _observe_ranges(
        model, calibration, lambda n, x: x - _fake_quant(x, *_affine_qparams(*x_range[n])))
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    for name, lin in linears:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, Q8Linear(lin, x_range[name], err_range[name]))
    return model


def randomize_norms(model: nn.Module, gen: torch.Generator) -> None:
    """Non-trivial LayerNorm affine parameters, so a kernel ignoring them fails."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))


@dataclass(frozen=True)
class TowerConfig:
    """Shapes of a SigLIP/Idefics3 vision tower plus the pixel-shuffle connector."""

    image: int
    patch: int
    width: int
    heads: int
    mlp: int
    layers: int
    text_width: int
    shuffle: int = 4
    eps: float = 1e-6

    @property
    def grid(self) -> int:
        return self.image // self.patch


class Attention(nn.Module):
    """Idefics3/SigLIP eager attention: bmm + softmax with view/transpose around them."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, width = x.shape
        shape = (b, s, self.heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)  # (b, heads, s, head_dim)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scale  # (b, heads, s, s)
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()  # (b, s, heads, head_dim)
        return self.out_proj(o.reshape(b, s, width).contiguous())


class EncoderLayer(nn.Module):
    """Pre-norm encoder layer: x + attn(ln1(x)), then + fc2(gelu_tanh(fc1(ln2(x))))."""

    def __init__(self, width: int, heads: int, mlp: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(width, eps=eps)
        self.self_attn = Attention(width, heads)
        self.layer_norm2 = nn.LayerNorm(width, eps=eps)
        self.fc1 = nn.Linear(width, mlp)
        self.fc2 = nn.Linear(mlp, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        h = F.gelu(self.fc1(self.layer_norm2(x)), approximate="tanh")
        return x + self.fc2(h)


class VisionTower(nn.Module):
    """pixel_values (1, 3, image, image) -> image embeddings (1, grid^2 / shuffle^2, text_width)."""

    def __init__(self, cfg: TowerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.patch_embedding = nn.Conv2d(3, cfg.width, cfg.patch, stride=cfg.patch)
        # The learned position table, already gathered for a full grid: (patches, width).
        self.position_table = nn.Parameter(0.5 * torch.randn(cfg.grid * cfg.grid, cfg.width))
        self.layers = nn.ModuleList(
            EncoderLayer(cfg.width, cfg.heads, cfg.mlp, cfg.eps) for _ in range(cfg.layers))
        self.post_layernorm = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.proj = nn.Linear(cfg.width * cfg.shuffle ** 2, cfg.text_width, bias=False)

    def pixel_shuffle(self, x: torch.Tensor) -> torch.Tensor:
        """Idefics3 connector: concatenate each shuffle x shuffle block of neighbouring patches."""
        b, seq, dim = x.shape
        side, r = self.cfg.grid, self.cfg.shuffle
        x = x.view(b, side, side, dim)
        x = x.view(b, side, side // r, dim * r)
        x = x.permute(0, 2, 1, 3)
        x = x.reshape(b, side // r, side // r, dim * r * r)
        x = x.permute(0, 2, 1, 3)
        return x.reshape(b, seq // (r * r), dim * r * r)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(pixel_values)  # (1, width, grid, grid)
        x = x.flatten(2).transpose(1, 2) + self.position_table  # (1, patches, width)
        for layer in self.layers:
            x = layer(x)
        x = self.post_layernorm(x)
        return self.proj(self.pixel_shuffle(x))
