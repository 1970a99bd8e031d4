"""Export published image architectures (tools/architecture_models.py) through ExecuTorch
1.5.1's WebGPU partitioner, as tools/export_fixtures.py exports its fixtures: NAME.pte and
NAME.npz (input_0 and output_0 = the eager logits), seeded random weights, eval mode.

The committed programs (tests/fixtures/architectures) are reduced so the folder stays small;
--full writes the paper-size ones (224x224, 1000 classes; 10 to 88 MB, not committed):

    python tools/export_architectures.py [--out tests/fixtures/architectures] [--only NAME ...]
    python tools/export_architectures.py --full --out out/architectures
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architecture_models import MobileNetV3Small, ResNet18, ViT, init_weights  # noqa: E402
from export_fixtures import write_fixture  # noqa: E402

CONV_OPS = ("aten.convolution.default", "aten.mean.dim", "aten.linear.default")

# name -> (module factory, input side, delegate ops the program must hold)
Architecture = tuple[Callable[[], nn.Module], int, tuple[str, ...]]

REDUCED: dict[str, Architecture] = {
    # Width multiplier 0.5 (torchvision's width_mult), 100 classes, 96x96 instead of 224x224.
    "mobilenet_v3_small_w05": (lambda: MobileNetV3Small(width=0.5, classes=100), 96,
                               CONV_OPS + ("aten.hardswish.default",)),
    # Stage widths 8..64 instead of 64..512, 100 classes, 64x64.
    "resnet18_w8": (lambda: ResNet18(base=8, classes=100), 64,
                    CONV_OPS + ("aten.max_pool2d_with_indices.default",)),
    # Patch 8 on 32x32 (16 patches + class token), width 64, 4 heads, MLP 128, 4 layers,
    # 100 classes.
    "vit_tiny_p8": (lambda: ViT(image=32, patch=8, width=64, heads=4, mlp=128, layers=4,
                                classes=100), 32,
                    ("aten.bmm.default", "aten._softmax.default",
                     "aten.native_layer_norm.default", "aten.gelu.default")),
}

FULL: dict[str, Architecture] = {
    "mobilenet_v3_small_224": (lambda: MobileNetV3Small(), 224,
                               REDUCED["mobilenet_v3_small_w05"][2]),
    "resnet18_224": (lambda: ResNet18(), 224, REDUCED["resnet18_w8"][2]),
    "vit_s16_224": (lambda: ViT(image=224, patch=16, width=384, heads=6, mlp=1536, layers=12,
                                classes=1000), 224, REDUCED["vit_tiny_p8"][2]),
}


def build(name: str, arch: Architecture) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The seeded eval-mode module and its one (1, 3, side, side) input."""
    factory, side, _ = arch
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    model = init_weights(factory(), gen)
    return model, (torch.randn((1, 3, side, side), generator=gen),)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path,
                        help="output folder (default tests/fixtures/architectures)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="export only these")
    parser.add_argument("--full", action="store_true",
                        help="the paper-size programs (large: needs --out)")
    args = parser.parse_args(argv)
    table = FULL if args.full else REDUCED
    if args.full and args.out is None:
        parser.error("--full writes large files: give --out")
    unknown = sorted(set(args.only or ()) - set(table))
    if unknown:
        parser.error(f"unknown architectures {unknown}; these are {sorted(table)}")
    out = args.out or Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "architectures"
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    for name in args.only or list(table):
        model, inputs = build(name, table[name])
        write_fixture(out, name, model, inputs, table[name][2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
