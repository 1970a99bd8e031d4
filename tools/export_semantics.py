"""Export the ExecuTorch-semantics fixtures: small programs exported the ordinary ways that
exercise ExecuTorch's memory model rather than any one kernel.

Dev-only (torch + executorch 1.5.1). Each fixture NAME is written as NAME.pte + NAME.npz
(input_0.. in method order, output_0.. eager PyTorch outputs; stateful fixtures hold several
calls as call{i}_input_{j} / call{i}_output_{j}). Ways:

* `portable`: `to_edge(...).to_executorch()`, no partitioner: every op a portable kernel call,
  every tensor memory-planned, views sharing their base's slot, outputs reusing dead slots;
* `webgpu`: the WebGPU partitioner;
* `aliased`: the WebGPU partitioner with `alias_buffer_mutations` (state read and written
  inside the delegate).

    python tools/export_semantics.py [--out tests/fixtures/semantics] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from executorch.backends.webgpu.partitioner import WebGPUPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (llama.update_cache)
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_fixtures import save_npz  # noqa: E402


class ReshapedLinear(nn.Module):
    """A linear over a reshaped 3-D input: the view shares the input's planned slot."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(7, 5)

    def forward(self, x):
        return self.fc(x.reshape(-1, 7)).reshape(2, 3, 5)


class TokenEmbedding(nn.Module):
    """A token-embedding gather, scaled by a 0-dim int64 constant cast to float."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(13, 6)

    def forward(self, tokens):
        return self.emb(tokens.view(-1)).view(2, 3, 6) * 2


class ScalarSum(nn.Module):
    """A 0-dim intermediate with a planned slot of its own."""

    def forward(self, x):
        return x * x.sum()


class NormStack(nn.Module):
    """conv + batch norm + relu + mean + softmax + layer norm + group norm: the multi-output
    norm kernels (native_batch_norm / native_layer_norm / native_group_norm .out)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.bn = nn.BatchNorm2d(6)
        self.gn = nn.GroupNorm(3, 6)
        self.ln = nn.LayerNorm(6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = self.gn(y).mean((2, 3))
        return self.ln(torch.softmax(y, -1))


class MaxIndices(nn.Module):
    """max / min with indices and split: several outputs of one kernel."""

    def forward(self, x):
        hi, hi_i = torch.max(x, dim=1)
        lo, lo_i = torch.min(x, dim=-1, keepdim=True)
        a, b, c = torch.split(x, [2, 1, 2], dim=1)
        return hi * 2, hi_i, lo + 1, lo_i, a - c, b


class InPlaceState(nn.Module):
    """A buffer mutated in place each call (a running sum, a cache row written by index)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(3, 5))
        self.register_buffer("cache", torch.zeros(6, 5))

    def forward(self, x, pos):
        self.acc.add_(x)
        self.cache.index_copy_(0, pos, x[:1])
        return self.acc * 1.5, self.cache.sum(0, keepdim=True)


class InputCache(nn.Module):
    """A cache the caller passes, updated in place by llama's update_cache inside the
    delegate: the program returns the updated cache as a second output."""

    def forward(self, value, cache):
        torch.ops.llama.update_cache(value, cache, 2)
        return cache * 1.0


def _stateful_calls(gen: torch.Generator):
    return [(torch.randn(3, 5, generator=gen), torch.tensor([i * 2 % 6])) for i in range(3)]


FIXTURES = {
    # name: (module factory, example inputs, way)
    "portable_reshaped_linear": (ReshapedLinear, lambda g: (torch.randn(2, 3, 7, generator=g),),
                                 "portable"),
    "portable_token_embedding": (TokenEmbedding,
                                 lambda g: (torch.randint(0, 13, (2, 3), generator=g),),
                                 "portable"),
    "portable_scalar_sum": (ScalarSum, lambda g: (torch.randn(3, 4, generator=g),), "portable"),
    "portable_norm_stack": (NormStack, lambda g: (torch.randn(1, 3, 9, 9, generator=g),),
                            "portable"),
    "portable_max_indices": (MaxIndices, lambda g: (torch.randn(4, 5, 3, generator=g),),
                             "portable"),
    "portable_inplace_state": (InPlaceState, None, "portable"),
    "webgpu_input_cache": (InputCache, lambda g: (torch.randn(1, 3, 2, 5, generator=g),
                                                  torch.randn(1, 7, 2, 5, generator=g)),
                           "webgpu"),
    "webgpu_inplace_state": (InPlaceState, None, "webgpu"),
    "aliased_inplace_state": (InPlaceState, None, "aliased"),
}


def export(module: nn.Module, example: tuple, way: str) -> bytes:
    ep = torch.export.export(module, example)
    if way == "portable":
        edge = to_edge(ep)
    else:
        options = {"alias_buffer_mutations": True} if way == "aliased" else {}
        edge = to_edge_transform_and_lower(ep, partitioner=[WebGPUPartitioner(options)])
    return edge.to_executorch(ExecutorchBackendConfig()).buffer


def write(out: Path, name: str) -> None:
    t0 = time.perf_counter()
    factory, inputs, way = FIXTURES[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    torch.manual_seed(sum(map(ord, name)))
    module = factory().eval()
    if inputs is None:  # stateful: several calls, eager state carried over
        calls = _stateful_calls(gen)
        data = export(factory().eval(), calls[0], way)
        arrays = {}
        with torch.no_grad():
            for i, args in enumerate(calls):
                outs = module(*args)
                arrays |= {f"call{i}_input_{j}": a.numpy() for j, a in enumerate(args)}
                arrays |= {f"call{i}_output_{j}": o.numpy() for j, o in enumerate(outs)}
    else:
        args = inputs(gen)
        data = export(module, tuple(a.clone() for a in args), way)
        mutated = tuple(a.clone() for a in args)
        with torch.no_grad():
            outs = module(*mutated)
        outs = outs if isinstance(outs, tuple) else (outs,)
        # Inputs the module mutates come back as outputs after the user's (ExecuTorch's order).
        outs += tuple(m for a, m in zip(args, mutated, strict=True) if not torch.equal(a, m))
        arrays = {f"input_{j}": a.numpy() for j, a in enumerate(args)}
        arrays |= {f"output_{j}": o.numpy() for j, o in enumerate(outs)}
    (out / f"{name}.pte").write_bytes(data)
    save_npz(out / f"{name}.npz", arrays)
    print(f"{name:28s} {time.perf_counter() - t0:5.1f} s  pte {len(data):7d} B", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/semantics"))
    ap.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or FIXTURES:
        write(args.out, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
