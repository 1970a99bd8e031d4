"""SmolVLM-style windowed decoder built from ExecuTorch's llama example (dev-only).

The module is ExecuTorch's llama `Transformer` (use_kv_cache, sdpa_with_kv_cache, HF rope,
apply_embedding=False) after the `export_llama_lib` source transforms, with two additions that
reproduce the published `smolvlm_decoder_q8.pte` op pattern:

* every linear (lm head included) may become a two-pass static int8 linear (`TwoPassQ8Linear`);
* each layer's KV cache applies a branch-free attention sink (`SinkKVCache`): when
  `input_pos == 0`, row 0 of the window writes constant K/V instead of its own.

Imports torch and executorch; never imported by the `webpte` package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from executorch.examples.models.llama.export_llama_lib import _get_source_transforms
from executorch.examples.models.llama.feed_forward import FeedForward
from executorch.examples.models.llama.llama_transformer import (
    TransformerBlock,
    construct_transformer,
)
from executorch.examples.models.llama.model_args import ModelArgs
from executorch.examples.models.llama.norm import RMSNorm
from executorch.examples.models.llama.rope import Rope
from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
    CustomKVCache,
)
from executorch.extension.llm.export.builder import DType
from torch import nn

QMIN, QMAX = -128, 127

Window = tuple[torch.Tensor, torch.Tensor]  # (embeds (1, window, dim) f32, input_pos (1,) int64)


@dataclass(frozen=True)
class DecoderConfig:
    """Shape and recipe of one windowed decoder program."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int
    vocab_size: int
    max_context_len: int
    window: int = 4
    norm_eps: float = 1e-5
    rope_theta: float = 100000.0
    q8: bool = True  # two-pass int8 linears; False keeps f32 nn.Linear (or q4's)
    # 4-bit group-wise symmetric linears (q8 False): "w4" weight-only (et_vk.linear_q4gsw),
    # "8da4w" with dynamic int8 activations (et_vk.linear_dq8ca_q4gsw); "" none
    q4: str = ""
    group_size: int = 32  # of q4's weight groups along K
    qk_norm: bool = False  # RMSNorm of q and k per head before rope (Qwen3, Gemma 3)
    # Gemma 3's layer: (1 + w) RMSNorms, norms after attention and after the feed-forward,
    # a gelu-tanh feed-forward and the input embeddings scaled by sqrt(dim) (`gemma3_block`)
    gemma: bool = False
    sink: bool = True  # constant K/V for row 0 when input_pos == 0
    seed: int = 0  # random weights, sink K/V and calibration windows


TINY = DecoderConfig(
    dim=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    hidden_dim=96,
    vocab_size=256,
    max_context_len=32,
)
SMOLVLM = DecoderConfig(
    dim=960,
    n_layers=32,
    n_heads=15,
    n_kv_heads=5,
    head_dim=64,
    hidden_dim=2560,
    vocab_size=49280,
    max_context_len=512,
)
SMOLLM2_135M = DecoderConfig(
    dim=576,
    n_layers=30,
    n_heads=9,
    n_kv_heads=3,
    head_dim=64,
    hidden_dim=1536,
    vocab_size=49152,
    max_context_len=512,
)


# Real-size shapes of the published WebGPU LLM programs (random weights, this recipe: int8
# two-pass linears or 4-bit, windowed, sink row), cut to `layers` by `real_size(name, layers)`.
# Embeddings (and so a tied head's sharing) are the host's. gemma3_1b has Gemma 3's layer
# (`gemma3_block`; its sqrt(dim) embedding scale is the program's first op) and its local
# layers' rope. The context of 512 is Gemma 3's sliding window, so a local layer's window
# holds the whole cache, as a global layer's does.
REAL_SIZE = {
    # Llama-3.2-1B: width 2048, 32/8 heads, hidden 8192, vocab 128,256 (int8 head 262.7 MB)
    "llama1b": DecoderConfig(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64,
                             hidden_dim=8192, vocab_size=128256, max_context_len=512,
                             rope_theta=500000.0),
    # Qwen3-0.6B's widths: 1024, 16/8 heads of 128, hidden 3072, vocab 151,936
    "qwen3_0_6b": DecoderConfig(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128,
                                hidden_dim=3072, vocab_size=151936, max_context_len=512,
                                norm_eps=1e-6, rope_theta=1000000.0, qk_norm=True),
    # Gemma-3-1B's widths: 1152, 4/1 heads of 256, hidden 6912, vocab 262,144 (int8 head 302 MB)
    "gemma3_1b": DecoderConfig(dim=1152, n_layers=26, n_heads=4, n_kv_heads=1, head_dim=256,
                               hidden_dim=6912, vocab_size=262144, max_context_len=512,
                               norm_eps=1e-6, rope_theta=1000000.0, qk_norm=True,
                               gemma=True),
}


QUANTS = ("q8", "w4", "8da4w")


def real_size(name: str, layers: int | None = None, quant: str = "q8") -> DecoderConfig:
    """A REAL_SIZE shape, with `layers` layers (default: all of them), its linears `quant`
    (QUANTS: two-pass int8, 4-bit weight-only, 4-bit with dynamic int8 activations)."""
    if quant not in QUANTS:
        raise ValueError(f"quant {quant!r}: one of {QUANTS}")
    config = replace(REAL_SIZE[name], q8=quant == "q8", q4="" if quant == "q8" else quant)
    return config if layers is None else replace(config, n_layers=layers)


def model_args(config: DecoderConfig) -> ModelArgs:
    """The llama `ModelArgs` of a config (max_seq_len = window + 1, like the published 5)."""
    return ModelArgs(
        dim=config.dim,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        head_dim=config.head_dim,
        hidden_dim=config.hidden_dim,
        vocab_size=config.vocab_size,
        norm_eps=config.norm_eps,
        max_batch_size=1,
        max_seq_len=config.window + 1,
        max_context_len=config.max_context_len,
        use_kv_cache=True,
        use_sdpa_with_kv_cache_op=True,
        use_hf_rope=True,
        rope_theta=config.rope_theta,
        use_qk_norm=config.qk_norm,
        qk_norm_before_rope=True,
        rms_norm_add_unit_offset=config.gemma,
        apply_embedding=False,
        # Makes rope slice its table with narrow(start_pos), which the hf-rope fusion needs;
        # the export itself stays static.
        enable_dynamic_shape=True,
        generate_full_logits=False,
    )


# ---------------------------------------------------------------- Gemma 3's layer


class GeluTanhFeedForward(FeedForward):
    """Gemma's feed-forward: w2(gelu_tanh(w1 x) * w3 x)."""

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x), approximate="tanh") * self.w3(x))


# Gemma 3 1B: every 6th layer (5, 11, 17, 23) attends globally with rope base 1,000,000; the
# others slide over the last 512 rows with rope base 10,000.
GEMMA3_GLOBAL_EVERY = 6
GEMMA3_LOCAL_ROPE_THETA = 10000.0


class Gemma3Block(TransformerBlock):
    """Gemma 3's block on the llama one: h = x + post_attention_norm(attention(norm(x))),
    out = h + post_ffn_norm(feed_forward(ffn_norm(h))); all norms (1 + w) RMSNorms. A local
    layer rotates q and k with its own rope (`local_rope`, set by gemma3_block)."""

    def forward(self, x, freqs_cos, freqs_sin, attn_options):
        local = self.__dict__.get("local_rope")
        if local is not None:
            freqs_cos, freqs_sin = local.get_freqs(attn_options.get("input_pos"), x.shape[1])
        attention, update = self.attention(
            self.attention_norm(x), freqs_cos, freqs_sin, **attn_options)
        h = x + self.post_attention_norm(attention)
        return h + self.post_ffn_norm(self.feed_forward(self.ffn_norm(h))), update


def gemma3_block(layer: TransformerBlock, config: DecoderConfig, local_rope=None) -> None:
    """Turn one of ExecuTorch's llama blocks (made with rms_norm_add_unit_offset) into Gemma 3's
    in place: its names stay the llama ones, plus `post_attention_norm` and `post_ffn_norm`.
    `local_rope` (a Rope registered elsewhere, shared by the local layers) makes it local."""
    layer.__class__ = Gemma3Block
    layer.feed_forward.__class__ = GeluTanhFeedForward
    for name in ("post_attention_norm", "post_ffn_norm"):
        setattr(layer, name, RMSNorm(config.dim, eps=config.norm_eps, add_unit_offset=True))
    layer.__dict__["local_rope"] = local_rope   # a reference, not a second registration


def construct(config: DecoderConfig) -> nn.Module:
    """ExecuTorch's llama Transformer of a config, with Gemma 3's blocks when config.gemma
    (the local layers' rope registered once, as `local_rope`)."""
    transformer = construct_transformer(model_args(config))
    if config.gemma:
        local = Rope(replace(model_args(config), rope_theta=GEMMA3_LOCAL_ROPE_THETA))
        transformer.local_rope = local
        for i, layer in enumerate(transformer.layers):
            glob = (i + 1) % GEMMA3_GLOBAL_EVERY == 0
            gemma3_block(layer, config, None if glob else local)
    return transformer


# ---------------------------------------------------------------- two-pass int8 linear


def affine_qparams(lo: float, hi: float) -> tuple[float, int]:
    """int8 affine (scale, zero point) covering [min(lo, 0), max(hi, 0)], as MinMaxObserver."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = max((hi - lo) / float(QMAX - QMIN), torch.finfo(torch.float32).eps)
    zero_point = int(min(max(QMIN - round(lo / scale), QMIN), QMAX))
    return float(scale), zero_point


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: scale = amax / 127.5 -> (int8 (N, K), f32 (N,))."""
    amax = weight.detach().abs().amax(dim=1).clamp(min=1e-12)
    scales = (amax / 127.5).to(torch.float32)
    q = torch.clamp(torch.round(weight.detach() / scales[:, None]), QMIN, QMAX).to(torch.int8)
    return q, scales


class TwoPassQ8Linear(nn.Module):
    """y = linear(q8(x)) + linear(q8(x - fq8(x))): static activation qparams, one int8 weight."""

    def __init__(self, linear: nn.Linear, pass1: tuple[float, int], pass2: tuple[float, int]):
        super().__init__()
        weight_int8, weight_scales = quantize_weight(linear.weight)
        self.register_buffer("weight_int8", weight_int8)  # (N, K) int8
        self.register_buffer("weight_scales", weight_scales)  # (N,) f32
        self.register_buffer("weight_zeros", torch.zeros_like(weight_scales, dtype=torch.int64))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        self.s1, self.z1 = pass1
        self.s2, self.z2 = pass2

    def _linear_q8(self, x: torch.Tensor, scale: float, zero: int, w: torch.Tensor, bias):
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor.default(x, scale, zero, QMIN, QMAX, torch.int8)
        xd = qd.dequantize_per_tensor.default(q, scale, zero, QMIN, QMAX, torch.int8)
        return F.linear(xd, w, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.ops.quantized_decomposed.dequantize_per_channel.default(
            self.weight_int8, self.weight_scales, self.weight_zeros, 0, QMIN, QMAX, torch.int8
        )
        y1 = self._linear_q8(x, self.s1, self.z1, w, self.bias)
        err = (
            x
            - (torch.clamp(torch.round(x * (1.0 / self.s1)) + self.z1, QMIN, QMAX) - self.z1)
            * self.s1
        )
        y2 = self._linear_q8(err, self.s2, self.z2, w, None)
        return y1 + y2


def register_linear_q8ta_q8csw_meta() -> None:
    """Meta kernel for et_vk::linear_q8ta_q8csw -> f32 (*x.shape[:-1], N); 1.5.1 infers int8."""
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (defines the op)

    op = torch.ops.et_vk.linear_q8ta_q8csw.default
    if op.has_kernel_for_dispatch_key("Meta"):
        return

    def meta(x, input_scale, input_zero_point, weights, weight_sums, weight_scales, bias=None):
        return x.new_empty((*x.shape[:-1], weights.shape[0]), dtype=torch.float32)

    lib = torch.library.Library("et_vk", "IMPL")
    lib.impl("linear_q8ta_q8csw", meta, "Meta")
    register_linear_q8ta_q8csw_meta._lib = lib  # keep the registration alive


# ---------------------------------------------------------------- attention sink


class SinkKVCache(CustomKVCache):
    """CustomKVCache whose window row 0 takes constant K/V when input_pos == 0, without branches.

    m = relu(1 - f32(input_pos)) is 1 at position 0 and 0 from position 1 on;
    k = k + (m * row0_mask) * (sink_k - k), likewise v.
    """

    def __init__(
        self, base: CustomKVCache, sink_k: torch.Tensor, sink_v: torch.Tensor, window: int
    ):
        _, ctx, n_kv_heads, head_dim = base.k_cache.shape
        super().__init__(1, ctx, n_kv_heads, head_dim, dtype=base.k_cache.dtype)
        self.register_buffer("sink_k", sink_k.reshape(1, 1, n_kv_heads, head_dim).float().clone())
        self.register_buffer("sink_v", sink_v.reshape(1, 1, n_kv_heads, head_dim).float().clone())
        row0 = torch.zeros(1, window, 1, 1)
        row0[0, 0] = 1.0
        self.register_buffer("row0_mask", row0)  # (1, window, 1, 1)

    def update(self, input_pos, k_val, v_val, indices=None):
        # k_val, v_val: (1, Hkv, S, D); the cache update works in (1, S, Hkv, D)
        k = k_val.transpose(1, 2)
        v = v_val.transpose(1, 2)
        m = torch.relu(1.0 - input_pos.to(torch.float32)).view(1, 1, 1, 1)
        gate = m * self.row0_mask  # (1, S, 1, 1)
        k = k + gate * (self.sink_k - k)
        v = v + gate * (self.sink_v - v)
        return super().update(input_pos, k.transpose(1, 2), v.transpose(1, 2), indices)


# ---------------------------------------------------------------- the program module


class WindowedDecoder(nn.Module):
    """forward(embeds (1, window, dim) f32, input_pos (1,) int64) -> last logits (1, vocab)."""

    def __init__(self, config: DecoderConfig, transformer: nn.Module):
        super().__init__()
        self.config = config
        self.transformer = transformer

    def forward(self, embeds: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        if self.config.gemma:
            embeds = embeds * float(self.config.dim) ** 0.5
        return self.transformer(tokens=None, attn_options={"input_pos": input_pos}, h=embeds)

    def caches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (k_cache, v_cache), each (1, ctx, Hkv, D) f32: the live buffers."""
        return [
            (layer.attention.kv_cache.k_cache, layer.attention.kv_cache.v_cache)
            for layer in self.transformer.layers
        ]

    def reset_caches(self) -> None:
        for k, v in self.caches():
            k.zero_()
            v.zero_()

    @torch.no_grad()
    def run(self, windows: Sequence[Window]) -> list[torch.Tensor]:
        """Run windows in order, carrying the KV cache; returns each call's logits."""
        return [self(e, p).clone() for e, p in windows]


def random_weights(config: DecoderConfig) -> dict[str, torch.Tensor]:
    """Seeded random weights in the llama state-dict naming (norm weights around 1)."""
    gen = torch.Generator().manual_seed(config.seed)
    with torch.device("meta"):  # shapes and names only
        ref = construct(config)
    out = {}
    unit = 0.0 if config.gemma else 1.0  # Gemma's norms scale by (1 + w)
    for name, p in ref.state_dict().items():
        if name.endswith(("norm.weight", "norm_fn.weight")):
            out[name] = unit + 0.1 * torch.randn(p.shape, generator=gen)
        elif p.dim() == 2:
            bound = p.shape[1] ** -0.5
            out[name] = (torch.rand(p.shape, generator=gen) * 2 - 1) * bound
    return out


def random_sink_kv(config: DecoderConfig) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Seeded random constant sink K/V per layer, each (Hkv, D)."""
    gen = torch.Generator().manual_seed(config.seed + 1)
    shape = (config.n_kv_heads, config.head_dim)
    return [
        (torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
        for _ in range(config.n_layers)
    ]


def calibration_windows(config: DecoderConfig, n_sequences: int = 2) -> list[Window]:
    """Seeded random windows covering the whole context: starts 0, w, 2w, ... per sequence."""
    gen = torch.Generator().manual_seed(config.seed + 2)
    w, ctx = config.window, config.max_context_len
    out = []
    for _ in range(n_sequences):
        rows = torch.randn(ctx, config.dim, generator=gen)
        out += [(rows[s : s + w][None], torch.tensor([s])) for s in range(0, ctx - w + 1, w)]
    return out


def _linears(model: nn.Module) -> dict[str, nn.Linear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear)}


@torch.no_grad()
def _observe(
    model: WindowedDecoder, windows: Sequence[Window], value_of
) -> dict[str, tuple[float, float]]:
    """min/max of value_of(name, x) over every linear input x while running the windows."""
    ranges: dict[str, tuple[float, float]] = {}
    hooks = []
    for name, lin in _linears(model).items():

        def hook(_mod, args, name=name):
            v = value_of(name, args[0])
            lo, hi = float(v.min()), float(v.max())
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))

        hooks.append(lin.register_forward_pre_hook(hook))
    model.reset_caches()
    model.run(windows)
    model.reset_caches()
    for h in hooks:
        h.remove()
    return ranges


def quantize_linears(model: WindowedDecoder, windows: Sequence[Window]) -> None:
    """Replace every nn.Linear by a TwoPassQ8Linear calibrated on the f32 model over `windows`."""
    pass1 = {n: affine_qparams(*r) for n, r in _observe(model, windows, lambda n, x: x).items()}

    def rounding_error(name, x):
        s, z = pass1[name]
        return x - (torch.clamp(torch.round(x * (1.0 / s)) + z, QMIN, QMAX) - z) * s

    pass2 = {n: affine_qparams(*r) for n, r in _observe(model, windows, rounding_error).items()}
    for name, lin in _linears(model).items():
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, attr, TwoPassQ8Linear(lin, pass1[name], pass2[name]))


def build_decoder(
    config: DecoderConfig,
    weights: Mapping[str, torch.Tensor] | None = None,
    *,
    sink_kv: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
    calibration: Sequence[Window] | None = None,
) -> WindowedDecoder:
    """Build the eager decoder program module (KV caches zeroed).

    weights: llama state-dict names (`layers.{i}.attention.wq.weight`, `...feed_forward.w1.weight`,
    `layers.{i}.attention_norm.weight`, `norm.weight`, `output.weight`, ...); HF q/k layout
    (HF rope, no permutation). None -> seeded random weights.
    sink_kv: per layer (k, v), each (n_kv_heads, head_dim): the constant row-0 K/V (post-rope K).
    None -> seeded random when weights is None; required with real weights when config.sink.
    calibration: windows run in order on fresh caches to set the activation qparams (config.q8).
    None -> `calibration_windows(config)`.
    """
    torch.manual_seed(config.seed)
    transformer = construct(config)
    state = dict(weights) if weights is not None else random_weights(config)
    missing, unexpected = transformer.load_state_dict(state, strict=False)
    missing = [
        m
        for m in missing
        if not m.endswith(("freqs_cos", "freqs_sin", "mask", "k_cache", "v_cache"))
    ]
    if missing or unexpected:
        raise ValueError(
            f"weights do not match the llama layout: missing {missing}, unexpected {unexpected}"
        )

    for transform in _get_source_transforms(
        dtype_override=DType.fp32, use_sdpa_with_kv_cache=True, use_kv_cache=True, vulkan=True
    ):
        transformer = transform(transformer)

    if config.sink:
        if sink_kv is None:
            if weights is not None:
                raise ValueError("real weights need sink_kv (see compute_sink_kv)")
            sink_kv = random_sink_kv(config)
        for layer, (k, v) in zip(transformer.layers, sink_kv, strict=True):
            layer.attention.kv_cache = SinkKVCache(layer.attention.kv_cache, k, v, config.window)

    model = WindowedDecoder(config, transformer).eval()
    if config.q8:
        quantize_linears(
            model, calibration if calibration is not None else calibration_windows(config)
        )
    elif config.q4:
        quantize_linears_q4(model, config.q4, config.group_size)
    model.reset_caches()
    return model


def quantize_linears_q4(model: nn.Module, how: str, group_size: int) -> None:
    """torchao's int4 group-wise linears, as ExecuTorch's llama export makes them: "w4"
    (qmode 4w: IntxWeightOnlyConfig) or "8da4w" (Int8DynamicActivationIntxWeightConfig)."""
    from torchao.quantization import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )
    from torchao.quantization.granularity import PerGroup

    if how == "w4":
        q_config = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size))
    elif how == "8da4w":
        q_config = Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(group_size))
    else:
        raise ValueError(f"q4 {how!r}: 'w4' or '8da4w'")
    with torch.no_grad():
        quantize_(model, q_config, filter_fn=lambda m, _fqn: isinstance(m, nn.Linear))


@torch.no_grad()
def compute_sink_kv(
    config: DecoderConfig, weights: Mapping[str, torch.Tensor], row: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (k, v), each (Hkv, D), that the f32 model writes for `row` (dim,) at position 0."""
    f32 = build_decoder(replace(config, q8=False, q4="", sink=False), weights)
    embeds = torch.zeros(1, config.window, config.dim)
    embeds[0, 0] = row
    f32(embeds, torch.tensor([0]))
    return [(k[0, 0].clone(), v[0, 0].clone()) for k, v in f32.caches()]
