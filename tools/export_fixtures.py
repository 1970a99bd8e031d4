"""Export the webpte test fixtures through ExecuTorch 1.5.1's WebGPU partitioner.

Dev-only (imports torch and executorch; nothing under py/ imports it). For each fixture NAME
it writes NAME.pte and NAME.npz (input_0.. in method input order with the method's dtypes,
output_0.. = eager PyTorch outputs of the same module), checks that the program is one
VK00 delegate call with no CPU kernels holding the ops the fixture is named for, and prints
the delegate's op histogram.

    python tools/export_fixtures.py [--out tests/fixtures] [--only NAME ...] [--list]
    python tools/export_fixtures.py --tower {tiny12,full} --out DIR   # large, not committed
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import time
import warnings
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
    extract_vk_flatbuffer,
    flatbuffer_to_vk_graph,
)
from executorch.backends.webgpu.partitioner import WebGPUPartitioner
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_models import (  # noqa: E402
    EncoderLayer,
    TowerConfig,
    VisionTower,
    quantize_linears_q8,
    randomize_norms,
)

Inputs = tuple[torch.Tensor, ...]


def _linear_q8ta_q8csw_meta(x, input_scale, input_zero_point, weights, weight_sums,
                            weight_scales, bias=None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weights.shape[0]), dtype=torch.float32)


# ExecuTorch 1.5.1's composite kernel gives a bias-less et_vk.linear_q8ta_q8csw the int8 dtype of
# its input during lowering; the op returns float32.
_ET_VK_META = torch.library.Library("et_vk", "IMPL")
_ET_VK_META.impl("linear_q8ta_q8csw", _linear_q8ta_q8csw_meta, "Meta")

# Delegate op histogram of the published smolvlm_vision_q8.pte (docs/smolvlm-files.md).
PUBLISHED_VISION_HISTOGRAM = {
    "aten._softmax.default": 12, "aten.add.Tensor": 171, "aten.bmm.default": 24,
    "aten.clamp.default": 73, "aten.clone.default": 268, "aten.convolution.default": 1,
    "aten.gelu.default": 12, "aten.mul.Tensor": 158, "aten.native_layer_norm.default": 25,
    "aten.permute_copy.default": 63, "aten.round.default": 73, "aten.squeeze_copy.dims": 48,
    "aten.sub.Tensor": 146, "aten.view_copy.default": 76,
    "dim_order_ops._to_dim_order_copy.default": 146, "et_vk.linear_q8ta_q8csw.default": 146,
    "et_vk.prepack.default": 305, "quantized_decomposed.quantize_per_tensor.default": 146,
}

TINY_TOWER = TowerConfig(image=64, patch=8, width=32, heads=2, mlp=64, layers=2, text_width=48)
TOWERS = {
    "tiny12": TowerConfig(image=64, patch=8, width=32, heads=2, mlp=64, layers=12, text_width=48),
    "full": TowerConfig(image=512, patch=16, width=768, heads=12, mlp=3072, layers=12,
                        text_width=960),
}


class Lambda(nn.Module):
    """A parameter-free op program: forward is `fn`."""

    def __init__(self, fn: Callable[..., object]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> object:
        return self.fn(*args)


class Rng:
    """Seeded random tensors; normal data is never exactly zero."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(shape, generator=self.gen)

    def uniform(self, *shape: int, lo: float = -1.0, hi: float = 1.0) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(shape, generator=self.gen)


@dataclass(frozen=True)
class Fixture:
    name: str
    build: Callable[[Rng], tuple[nn.Module, Inputs]]
    expects: tuple[str, ...]  # delegate op names the program must contain
    skip_dim_order: bool = False  # casts stay aten._to_copy, as in the decoder program
    inline_delegate: bool = False  # delegate blob inside the flatbuffer, not in a segment


def _round_inputs(r: Rng) -> Inputs:
    x = r.randn(3, 5, 7, scale=4.0)
    x[0, 0, :7] = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5])  # ties go to even
    return (x,)


def _quantize_build(r: Rng) -> tuple[nn.Module, Inputs]:
    # The int8 result is the program output: an int8 -> f32 cast does not delegate.
    fn = Lambda(lambda x: torch.ops.quantized_decomposed.quantize_per_tensor(
        x, 0.05, 3, -128, 127, torch.int8))
    return fn, (r.randn(3, 5, 7, scale=4.0),)  # |x| / 0.05 > 128 clamps some elements


def _seeded(module: Callable[[], nn.Module], *inputs: Callable[[Rng], torch.Tensor]):
    def build(r: Rng) -> tuple[nn.Module, Inputs]:
        m = module()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(r.randn(*p.shape, scale=0.5))
        return m.eval(), tuple(f(r) for f in inputs)
    return build


def _op(fn: Callable[..., object], *shapes: tuple[int, ...]):
    return lambda r: (Lambda(fn), tuple(r.randn(*s) for s in shapes))


def _to_copy_build(r: Rng) -> tuple[nn.Module, Inputs]:
    fn = Lambda(lambda x, i: (x.to(torch.int32).to(torch.float32), i.to(torch.float32)))
    return fn, (r.randn(3, 5, 7, scale=10.0), torch.tensor([-3, 7, 1, 12, -40], dtype=torch.int64))


def _block_build(r: Rng) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(r.gen.initial_seed())
    layer = EncoderLayer(width=24, heads=3, mlp=40)
    randomize_norms(layer, r.gen)
    return layer.eval(), (r.randn(1, 13, 24),)


def _linear_q8_build(r: Rng) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(r.gen.initial_seed())
    lin = nn.Linear(36, 20)
    x = r.randn(1, 7, 36)
    calib = [(x,), (r.randn(1, 7, 36),)]
    return quantize_linears_q8(nn.Sequential(lin), calib).eval(), (x,)


class Q4Model(nn.Module):
    """A 4-bit token table feeding a 4-bit linear with bias, and one without over another
    input: torchao's weight-only int4 group-wise form, which the partitioner turns into
    et_vk.embedding_q4gsw and et_vk.linear_q4gsw."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(37, 64)
        self.lin = nn.Linear(64, 20)
        self.lin2 = nn.Linear(40, 12, bias=False)

    def forward(self, tokens: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(self.emb(tokens)), self.lin2(x)


def _q4gsw_build(r: Rng) -> tuple[nn.Module, Inputs]:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    m = _seeded(Q4Model)(r)[0]
    # 1.5.1's pattern pads the scales of an N that is not a multiple of 4 and then fails.
    for name, group in (("emb", 32), ("lin", 32), ("lin2", 8)):
        quantize_(m, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group)),
                  filter_fn=lambda _mod, fqn, name=name: fqn == name)
    tokens = torch.randint(0, 37, (2, 5), generator=r.gen)
    return m.eval(), (tokens, r.randn(3, 40))


class LlamaRope(nn.Module):
    """Llama's apply_rotary_emb (examples/models/llama/rope.py), which the partitioner fuses
    into et_vk.apply_rotary_emb."""

    def forward(self, xq, xk, freqs_cos, freqs_sin):
        xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
        xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)
        shape = [d if i == 1 or i == xq_r.ndim - 1 else 1 for i, d in enumerate(xq_r.shape)]
        cos, sin = freqs_cos.view(shape), freqs_sin.view(shape)
        xq_out = torch.stack([xq_r * cos - xq_i * sin, xq_r * sin + xq_i * cos], dim=-1)
        xk_out = torch.stack([xk_r * cos - xk_i * sin, xk_r * sin + xk_i * cos], dim=-1)
        return xq_out.flatten(3).type_as(xq), xk_out.flatten(3).type_as(xk)


def _rope_build(r: Rng) -> tuple[nn.Module, Inputs]:
    seq, dim = 3, 12
    angles = (torch.arange(seq)[:, None] + 0.5) * 10000.0 ** (-torch.arange(0, dim, 2) / dim)
    return LlamaRope(), (r.randn(1, seq, 4, dim), r.randn(1, seq, 2, dim), angles.cos(),
                         angles.sin())


def tower_pair(cfg: TowerConfig, seed: int = 2024) -> tuple[nn.Module, nn.Module, Inputs]:
    """(q8 tower, f32 twin holding the unquantized weights, pixel_values).

    The q8 activation ranges come from the f32 twin run on the input and one more image.
    """
    torch.manual_seed(seed)
    r = Rng(seed)
    f32 = VisionTower(cfg)
    randomize_norms(f32, r.gen)
    f32.eval()
    pixels = r.uniform(1, 3, cfg.image, cfg.image)
    calibration = [(pixels,), (r.uniform(1, 3, cfg.image, cfg.image),)]
    q8 = quantize_linears_q8(copy.deepcopy(f32), calibration)
    return q8.eval(), f32, (pixels,)


Q8_OPS = ("et_vk.linear_q8ta_q8csw.default", "quantized_decomposed.quantize_per_tensor.default")
ATTN_OPS = ("aten.bmm.default", "aten._softmax.default", "aten.native_layer_norm.default",
            "aten.gelu.default")
VISION_Q8_OPS = Q8_OPS + ATTN_OPS + ("aten.convolution.default",)

FIXTURE_LIST = [
    Fixture("op_add", _op(lambda a, b, c: a + b + c + 0.75, (2, 5, 7), (5, 1), ()),
            ("aten.add.Tensor",)),
    Fixture("op_sub", _op(lambda a, b: torch.sub(a, b, alpha=2), (3, 1, 7), (5, 7)),
            ("aten.sub.Tensor",)),
    Fixture("op_mul", _op(lambda a, b, c: a * b * c, (3, 5, 7), (1, 5, 1), ()),
            ("aten.mul.Tensor",)),
    Fixture("op_round", lambda r: (Lambda(torch.round), _round_inputs(r)),
            ("aten.round.default",)),
    Fixture("op_clamp", _op(lambda x: (torch.clamp(x, -0.5, 0.75), torch.clamp(x, min=-1),
                                       torch.clamp(x, max=1)), (3, 5, 7)),
            ("aten.clamp.default",)),
    Fixture("op_relu", _op(torch.relu, (3, 5, 7)), ("aten.relu.default",)),
    Fixture("op_relu_inline", _op(torch.relu, (3, 5, 7)), ("aten.relu.default",),
            inline_delegate=True),
    Fixture("op_sigmoid", _op(torch.sigmoid, (3, 5, 7)), ("aten.sigmoid.default",)),
    Fixture("op_gelu_tanh", _op(lambda x: nn.functional.gelu(x, approximate="tanh"), (3, 5, 7)),
            ("aten.gelu.default",)),
    Fixture("op_gelu_none", _op(nn.functional.gelu, (3, 5, 7)), ("aten.gelu.default",)),
    Fixture("op_to_copy", _to_copy_build, ("dim_order_ops._to_dim_order_copy.default",)),
    Fixture("op_to_copy_aten", _to_copy_build, ("aten._to_copy.default",), skip_dim_order=True),
    Fixture("op_view", _op(lambda x: x.view(5, 21), (3, 5, 7)), ("aten.view_copy.default",)),
    Fixture("op_squeeze", _op(lambda x: torch.squeeze(x, (1, 3)), (3, 1, 7, 1)),
            ("aten.squeeze_copy.dims",)),
    Fixture("op_permute", _op(lambda x: x.permute(0, 2, 3, 1), (2, 3, 5, 7)),
            ("aten.permute_copy.default",)),
    Fixture("op_select", _op(lambda x: x.select(1, -1), (3, 5, 7)), ("aten.select_copy.int",)),
    Fixture("op_softmax", _op(lambda x: torch.softmax(x, dim=-1), (3, 5, 7)),
            ("aten._softmax.default",)),
    Fixture("op_bmm", _op(torch.bmm, (3, 5, 7), (3, 7, 9)), ("aten.bmm.default",)),
    Fixture("op_linear", _seeded(lambda: nn.Linear(13, 11), lambda r: r.randn(1, 5, 13)),
            ("aten.linear.default",)),
    Fixture("op_layer_norm", _seeded(lambda: nn.LayerNorm(13, eps=1e-6),
                                     lambda r: r.randn(1, 5, 13)),
            ("aten.native_layer_norm.default",)),
    Fixture("op_conv_patch", _seeded(lambda: nn.Conv2d(3, 7, 5, stride=5),
                                     lambda r: r.randn(1, 3, 15, 20)),
            ("aten.convolution.default",)),
    Fixture("op_gather", lambda r: (Lambda(lambda x, i: torch.gather(x, 1, i)),
                                    (r.randn(3, 5, 7), torch.randint(0, 5, (3, 2, 7),
                                                                     generator=r.gen))),
            ("aten.gather.default",)),
    Fixture("op_q4gsw", _q4gsw_build,
            ("et_vk.embedding_q4gsw.default", "et_vk.linear_q4gsw.default")),
    Fixture("op_rope_llama", _rope_build, ("et_vk.apply_rotary_emb.default",)),
    Fixture("op_quantize", _quantize_build,
            ("quantized_decomposed.quantize_per_tensor.default",)),
    Fixture("linear_q8", _linear_q8_build, Q8_OPS),
    Fixture("siglip_block_f32", _block_build, ATTN_OPS),
    Fixture("vision_q8_tiny", lambda r: tower_pair(TINY_TOWER)[0::2], VISION_Q8_OPS),
    Fixture("vision_f32_tiny", lambda r: tower_pair(TINY_TOWER)[1:],
            ATTN_OPS + ("aten.convolution.default", "aten.linear.default")),
]
FIXTURES = {f.name: f for f in FIXTURE_LIST}


def delegate_histogram(edge) -> Counter:
    """Op names of every VK00 delegate graph in the lowered edge program."""
    hist: Counter = Counter()
    for _name, lowered, _node in get_lowered_submodules(edge.exported_program().graph_module):
        graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(lowered.processed_bytes))
        hist.update(op.name for op in graph.chain)
    return hist


def export_program(module: nn.Module, inputs: Inputs, skip_dim_order: bool = False,
                   inline_delegate: bool = False) -> tuple[bytes, Counter]:
    """Lower `module` through the WebGPU partitioner; fail unless it is fully delegated."""
    ep = torch.export.export(module, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner()],
                                       compile_config=EdgeCompileConfig(
                                           _skip_dim_order=skip_dim_order))
    hist = delegate_histogram(edge)
    program = edge.to_executorch(ExecutorchBackendConfig(
        extract_delegate_segments=not inline_delegate))
    plan = program.executorch_program.execution_plan[0]
    cpu_ops = [op.name for op in plan.operators]
    if cpu_ops or len(plan.delegates) != 1:
        raise RuntimeError(f"not fully delegated: {len(plan.delegates)} delegates, "
                           f"CPU kernels {cpu_ops}")
    data = program.buffer
    if data[4:8] != b"ET12":
        raise RuntimeError(f"bad file identifier {data[4:8]!r}")
    return data, hist


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez with a fixed timestamp, so re-exporting rewrites identical bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.array(arr, order="C"))


def write_fixture(out: Path, name: str, module: nn.Module, inputs: Inputs,
                  expects: tuple[str, ...], skip_dim_order: bool = False,
                  inline_delegate: bool = False) -> Counter:
    """Export one fixture, write NAME.pte and NAME.npz, print one progress line."""
    t0 = time.perf_counter()
    with torch.no_grad():
        eager = module(*inputs)
    outputs = eager if isinstance(eager, tuple) else (eager,)
    data, hist = export_program(module, inputs, skip_dim_order, inline_delegate)
    missing = [op for op in expects if op not in hist]
    if missing:
        raise RuntimeError(f"{name}: delegate lacks {missing}; it has {dict(hist)}")
    (out / f"{name}.pte").write_bytes(data)
    arrays = {f"input_{i}": t.numpy() for i, t in enumerate(inputs)}
    arrays |= {f"output_{i}": t.detach().numpy() for i, t in enumerate(outputs)}
    save_npz(out / f"{name}.npz", arrays)
    npz_bytes = (out / f"{name}.npz").stat().st_size
    ops = ", ".join(f"{k} {v}" for k, v in sorted(hist.items()))
    print(f"{name:18s} {time.perf_counter() - t0:6.1f} s  pte {len(data):9d} B  "
          f"npz {npz_bytes:8d} B  | {ops}", flush=True)
    return hist


def compare_published(hist: Counter, layers: int) -> None:
    """Print how a q8 tower's histogram relates to the published (12-layer) vision program's."""
    absent = sorted(set(PUBLISHED_VISION_HISTOGRAM) - set(hist))
    extra = sorted(set(hist) - set(PUBLISHED_VISION_HISTOGRAM))
    print(f"  published vision op names: {len(PUBLISHED_VISION_HISTOGRAM) - len(absent)} of "
          f"{len(PUBLISHED_VISION_HISTOGRAM)} present; absent {absent}; not published {extra}")
    if layers != 12:
        return
    diffs = [(n, hist[n], want) for n, want in PUBLISHED_VISION_HISTOGRAM.items()
             if hist[n] != want]
    print(f"  published vision op counts: {len(PUBLISHED_VISION_HISTOGRAM) - len(diffs)} of "
          f"{len(PUBLISHED_VISION_HISTOGRAM)} match")
    for n, got, want in diffs:
        print(f"    {n}: {got} here, {want} published")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="output folder (default tests/fixtures)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="export only these fixtures")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    parser.add_argument("--tower", choices=sorted(TOWERS),
                        help="export only the large q8 tower vision_q8_<TOWER> (needs --out)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(FIXTURES))
        return 0
    if args.tower and args.out is None:
        parser.error("--tower writes large files: give --out")
    out = args.out or Path(__file__).resolve().parents[1] / "tests" / "fixtures"
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    if args.tower:
        q8, _f32, inputs = tower_pair(TOWERS[args.tower])
        hist = write_fixture(out, f"vision_q8_{args.tower}", q8, inputs, VISION_Q8_OPS)
        compare_published(hist, TOWERS[args.tower].layers)
        return 0
    unknown = sorted(set(args.only or ()) - set(FIXTURES))
    if unknown:
        parser.error(f"unknown fixtures {unknown}; see --list")
    for name in args.only or list(FIXTURES):
        fx = FIXTURES[name]
        module, inputs = fx.build(Rng(zlib.crc32(name.encode())))
        hist = write_fixture(out, name, module, inputs, fx.expects, fx.skip_dim_order,
                             fx.inline_delegate)
        if name == "vision_q8_tiny":
            compare_published(hist, TINY_TOWER.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
