"""Export a sample of the kept difftest programs (tests/fixtures/difftest/NAME.py) for the
page: NAME_WAY.pte + NAME_WAY.npz (call{i}_input_{j} / call{i}_output_{j}, eager PyTorch's
outputs) in tests/fixtures/difftest/page/, which tests/browser/difftest.test.mjs runs in
headless Chromium against those outputs.

Dev-only (torch + executorch 1.5.1): the programs are exported as `webpte difftest` exports
them (webpte.difftest.export).

    python tools/export_difftest.py [--out tests/fixtures/difftest/page]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from webpte.difftest.export import eager, export, load_module  # noqa: E402

KEPT = ROOT / "tests" / "fixtures" / "difftest"
# (kept program, way): one program per bug that shaped the plan, small enough for the page.
SAMPLE = (
    ("unused_input", "webgpu"),               # an input no delegate takes
    ("output_is_input", "webgpu"),            # a method output that is a method input
    ("delegate_args_count", "webgpu"),        # a delegate output passed at two places
    ("scalar_shared_by_equality", "webgpu"),  # a slice step serialized as a Double
    ("portable_out_forms", "portable"),       # the portable kernels' own forms
    ("sibling_before_producer", "webgpu"),    # a merged dispatch before a producer (GPU only)
    ("aliased_state_read_write", "alias"),    # state read and written in one delegate
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(KEPT / "page"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, way in SAMPLE:
        ns = load_module((KEPT / f"{name}.py").read_text(), f"{name}.py")
        inputs, expected = eager(ns)
        stem = out / f"{name}_{way}"
        stem.with_suffix(".pte").write_bytes(export(ns, way))
        arrays = {}
        for i, (ins, outs) in enumerate(zip(inputs, expected)):
            arrays |= {f"call{i}_input_{j}": a for j, a in enumerate(ins)}
            arrays |= {f"call{i}_output_{j}": o for j, o in enumerate(outs)}
        np.savez(stem.with_suffix(".npz"), **arrays)
        print(f"{stem.name}: {len(inputs)} calls, "
              f"{stem.with_suffix('.pte').stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
