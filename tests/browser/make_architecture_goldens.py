"""Goldens for tests/browser/architectures.test.mjs, written by the native side.

For every NAME.pte with its NAME.npz in PTE_DIR (default tests/fixtures/architectures): the
calls (input and eager logits) as raw little-endian tensors under OUT_DIR/NAME/, and
OUT_DIR/manifest.json listing them with the program tolerance (rel-L2 1e-4, as natively).

Usage: python tests/browser/make_architecture_goldens.py OUT_DIR [PTE_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_goldens import write_calls  # noqa: E402

from webpte.cli import _calls_from_npz  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4  # f32 programs, as tests/test_programs.py and tests/test_architectures.py


def main(out_dir: str, pte_dir: str | None = None) -> None:
    out = Path(out_dir)
    src = Path(pte_dir) if pte_dir else ROOT / "tests" / "fixtures" / "architectures"
    out.mkdir(parents=True, exist_ok=True)
    entries = [{"name": p.stem, "pte": p.name, "tolerance": TOLERANCE,
                "calls": write_calls(out, p.stem, _calls_from_npz(str(p.with_suffix(".npz"))))}
               for p in sorted(src.glob("*.pte")) if p.with_suffix(".npz").exists()]
    if not entries:
        raise SystemExit(f"no NAME.pte with NAME.npz in {src}")
    (out / "manifest.json").write_text(json.dumps({"dir": str(src.resolve()),
                                                   "programs": entries}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
