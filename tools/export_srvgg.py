"""Export an SRVGGNetCompact-style x4 super-resolution net (Real-ESRGAN's realesr-general-x4v3
shape) with seeded random weights through ExecuTorch 1.5.1's WebGPU partitioner (dev-only).

The net (Real-ESRGAN `archs/srvgg_arch.py`): conv 3->64 + PReLU, `convs` x (conv 64->64 3x3 +
PReLU), conv 64->48, pixel_shuffle(4), plus the input upsampled x4 (nearest). Writes NAME.pte
and NAME.npz (input_0 the image (1, 3, H, W) f32 in [0, 1], output_0 eager's (1, 3, 4H, 4W)).

    python tools/export_srvgg.py                              # tests/fixtures/srvgg_x4_tiny
    python tools/export_srvgg.py --convs 32 --size 256 --out build/sr   # srvgg_x4_32c_256
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_fixtures import write_fixture  # noqa: E402

SR_OPS = ("aten.convolution.default", "aten.pixel_shuffle.default",
          "aten.upsample_nearest2d.vec")


class SRVGGNetCompact(nn.Module):
    """forward(x (1, 3, H, W)) -> (1, 3, scale*H, scale*W)."""

    def __init__(self, feat: int = 64, convs: int = 32, scale: int = 4):
        super().__init__()
        self.scale = scale
        layers: list[nn.Module] = [nn.Conv2d(3, feat, 3, 1, 1), nn.PReLU(feat)]
        for _ in range(convs):
            layers += [nn.Conv2d(feat, feat, 3, 1, 1), nn.PReLU(feat)]
        layers.append(nn.Conv2d(feat, 3 * scale * scale, 3, 1, 1))
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.pixel_shuffle(self.body(x), self.scale)
        return out + F.interpolate(x, scale_factor=self.scale, mode="nearest")


def build(convs: int, size: int, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The net with seeded random weights (PReLU slopes in [0.05, 0.45]) and one image."""
    torch.manual_seed(seed)
    net = SRVGGNetCompact(convs=convs).eval()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.PReLU):
                m.weight.uniform_(0.05, 0.45)
    image = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(seed + 1))
    return net, (image,)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convs", type=int, default=4, help="body convs (x4v3: 32)")
    parser.add_argument("--size", type=int, default=32, help="input height and width")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures"))
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    name = ("srvgg_x4_tiny" if (args.convs, args.size) == (4, 32)
            else f"srvgg_x4_{args.convs}c_{args.size}")
    args.out.mkdir(parents=True, exist_ok=True)
    net, inputs = build(args.convs, args.size)
    write_fixture(args.out, name, net, inputs, SR_OPS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
