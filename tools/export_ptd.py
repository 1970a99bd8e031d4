"""Export the external-data fixtures: one small module whose constants live in `.ptd` files
instead of the `.pte`, both ways ExecuTorch keeps them there.

Dev-only (torch + executorch 1.5.1). Written to --out (default tests/fixtures/ptd):

* `program.pte` + `program.ptd`: no partitioner, `ExecutorchBackendConfig(external_constants=
  True)`: the program's own constants are EXTERNAL, keyed by fully qualified name;
* `delegate.pte` + `delegate_0.ptd`, `delegate_1.ptd`: the WebGPU partitioner with
  `external_constants_max_data_bytes` small enough that the VK00 constants (named by the
  sha256 of their bytes) are sharded over two files;
* `other.ptd`: the program way for a module of other sizes (same keys, other tensors): the
  data file of another export;
* `ptd.npz`: input_0 and the eager output_0.

ExecuTorch names the files by their tag (`_default_external_constant`,
`vulkan_constants_<sha256>`); the .pte does not name them, so they are renamed here (the
delegate's shards in their tags' order).

    python tools/export_ptd.py [--out tests/fixtures/ptd]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from executorch.backends.webgpu.partitioner import WebGPUPartitioner
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_fixtures import save_npz  # noqa: E402

# The delegate's shard cap: weight (7 x 5 f32, 140 bytes), bias and scale (20 each) in two shards.
SHARD_BYTES = 160


class ScaledLinear(nn.Module):
    """relu(linear(x)) * scale: a weight, a bias and a buffer, all constants."""

    def __init__(self, n_out: int = 5) -> None:
        super().__init__()
        self.fc = nn.Linear(7, n_out)
        self.register_buffer("scale", torch.rand(n_out) + 0.5)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def export(module: nn.Module, x: torch.Tensor, way: str) -> tuple[bytes, list[bytes]]:
    """(.pte bytes, .ptd bytes in their tags' order) of one way."""
    ep = torch.export.export(module, (x,))
    if way == "program":
        prog = to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=True))
    else:
        part = WebGPUPartitioner({"external_constants_max_data_bytes": SHARD_BYTES})
        prog = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch(
            ExecutorchBackendConfig())
    with tempfile.TemporaryDirectory() as d:
        prog.write_tensor_data_to_file(d)
        files = [p.read_bytes() for p in sorted(Path(d).glob("*.ptd"))]
    return prog.buffer, files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/ptd"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(7)
    module = ScaledLinear().eval()
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        y = module(x)
    save_npz(args.out / "ptd.npz", {"input_0": x.numpy(), "output_0": y.numpy()})
    pte, files = export(module, x, "program")
    assert len(files) == 1, len(files)
    (args.out / "program.pte").write_bytes(pte)
    (args.out / "program.ptd").write_bytes(files[0])
    pte, files = export(module, x, "delegate")
    assert len(files) == 2, len(files)
    (args.out / "delegate.pte").write_bytes(pte)
    for i, data in enumerate(files):
        (args.out / f"delegate_{i}.ptd").write_bytes(data)
    _, files = export(ScaledLinear(6).eval(), x, "program")
    (args.out / "other.ptd").write_bytes(files[0])
    for p in sorted(args.out.iterdir()):
        print(f"{p.name:16s} {p.stat().st_size:6d} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
