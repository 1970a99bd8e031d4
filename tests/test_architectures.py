"""Tier 1, published architectures: MobileNetV3-small, ResNet-18 and a ViT
(tools/export_architectures.py; tests/fixtures/architectures, reduced widths and resolution),
run natively against the eager PyTorch logits saved beside them and against our numpy graph
interpreter. The page runs the same programs in tests/browser/architectures.test.mjs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness import assert_close
from webpte.cli import _calls_from_npz
from webpte.kernels.reference import run_reference
from webpte.program import load

ARCHITECTURES = Path(__file__).parent / "fixtures" / "architectures"
PROGRAMS = sorted(ARCHITECTURES.glob("*.pte"))
TOLERANCE = 1e-4  # rel-L2 vs eager, as every f32 program (tests/test_programs.py)


def test_every_architecture_has_reference():
    names = {p.stem for p in PROGRAMS}
    assert {"mobilenet_v3_small_w05", "resnet18_w8", "vit_tiny_p8"} <= names
    assert all(p.with_suffix(".npz").exists() for p in PROGRAMS)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_architecture_matches_eager(gpu, path):
    prog = load(path)
    prog.executor.poison()
    fwd = prog.program.method("forward")
    [(inputs, (expected,))] = _calls_from_npz(str(path.with_suffix(".npz")))
    (logits,) = prog.run(*inputs)
    assert_close(logits, expected, rel=TOLERANCE, what=f"{path.stem} logits vs eager")
    ref = run_reference(fwd.graph, dict(zip(fwd.input_value_ids(), inputs, strict=True)),
                        prog.data, {})
    assert_close(logits, ref.get(fwd.output_value_ids()[0]), rel=TOLERANCE,
                 what=f"{path.stem} logits vs numpy")
    assert np.argmax(logits) == np.argmax(expected)
