"""Export the vision tower benchmark program: a SmolVLM-shaped q8 tower cut to a few layers.

Dev-only (torch + executorch). Two of SmolVLM-500M's 12 vision layers by default (1024 patch
rows, width 768, 12 heads, MLP 3072): every kernel family of the whole tower at a sixth of
its time. Writes OUT/vision_q8_full<LAYERS>.pte and .npz (about 31 MB; not committed).

    python tools/export_vision_bench.py [--out build/vision_bench] [--layers 2]
    webpte bench --roofline build/vision_bench/vision_q8_full2.pte   # or: make bench-vision
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from export_fixtures import TOWERS, VISION_Q8_OPS, tower_pair, write_fixture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/vision_bench"))
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    if args.layers < 1:
        parser.error("--layers must be at least 1")
    cfg = dataclasses.replace(TOWERS["full"], layers=args.layers)
    args.out.mkdir(parents=True, exist_ok=True)
    q8, _f32, inputs = tower_pair(cfg)
    write_fixture(args.out, f"vision_q8_full{args.layers}", q8, inputs, VISION_Q8_OPS)


if __name__ == "__main__":
    main()
