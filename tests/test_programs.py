"""Tier 1 program conformance: every committed fixture, run natively, against the eager
PyTorch outputs saved beside it (and against our numpy graph interpreter)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness import assert_close
from webpte.cli import _calls_from_npz
from webpte.kernels.reference import run_reference
from webpte.program import load
from webpte.testing import rel_l2

FIXTURES = Path(__file__).parent / "fixtures"
PROGRAMS = sorted(p for p in FIXTURES.glob("*.pte") if p.with_suffix(".npz").exists())


def tolerance(name: str) -> float:
    """rel-L2 vs eager: 2e-3 for int8 programs (rounding ties differ), 1e-4 for f32."""
    return 2e-3 if "q8" in name else 1e-4


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_program_matches_eager(gpu, path):
    prog = load(path)
    calls = _calls_from_npz(str(path.with_suffix(".npz")))
    prog.executor.poison()
    fwd = prog.program.method("forward")
    graph = fwd.graph
    in_ids, out_ids = fwd.input_value_ids(), fwd.output_value_ids()
    state: dict = {}
    for i, (inputs, expected) in enumerate(calls):
        outs = prog.run(*inputs)
        ref_env = run_reference(graph, dict(zip(in_ids, inputs, strict=True)), prog.data, state)
        assert len(outs) == len(expected)
        for j, (o, e) in enumerate(zip(outs, expected, strict=True)):
            assert_close(o, e.astype(o.dtype), rel=tolerance(path.stem),
                         what=f"{path.stem} call {i} output {j} vs eager")
            ours = ref_env.get(out_ids[j])
            assert_close(o, ours, rel=1e-4, what=f"{path.stem} call {i} output {j} vs numpy")
            if o.ndim >= 1 and o.shape[-1] > 1 and "decoder" in path.stem:
                assert np.array_equal(o.argmax(-1), e.argmax(-1)), \
                    f"call {i}: greedy token differs from eager"


@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem.startswith("decoder_")],
                         ids=lambda p: p.stem)
def test_decoder_final_caches(gpu, path):
    """After the whole reference sequence the KV caches equal eager's."""
    z = np.load(path.with_suffix(".npz"))
    prog = load(path)
    for inputs, _ in _calls_from_npz(str(path.with_suffix(".npz"))):
        prog.run(*inputs)
    graph = prog.graph
    sdpa = [op for op in graph.chain if op.name.startswith("sdpa_with_kv_cache")]
    by_value = {v: b for b in prog.plan.buffers if b.role == "state" for v in b.values}
    assert len(sdpa) and len(by_value) == 2 * len(sdpa)
    for layer, op in enumerate(sdpa):
        for kind, vid in (("k", op.args[3]), ("v", op.args[4])):
            t = graph.tensor(vid)
            raw = prog.executor.read_buffer(by_value[vid].id)
            got = np.frombuffer(raw, np.float32, count=t.numel).reshape(t.dims)
            want = z[f"final_{kind}_cache_{layer}"].reshape(t.dims)
            err = rel_l2(got, want)
            assert err <= tolerance(path.stem), f"layer {layer} {kind} cache rel-L2 {err:.2e}"


def test_every_fixture_has_reference():
    npz = {p.stem for p in FIXTURES.glob("*.npz")}
    pte = {p.stem for p in FIXTURES.glob("*.pte")}
    assert pte and pte <= npz, f"fixtures without reference outputs: {sorted(pte - npz)}"
    assert all(re.match(r"^[a-z0-9_]+$", s) for s in pte)
