"""`webpte inspect` and `webpte run` on committed fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from webpte.cli import main, reference_problems
from webpte.testing import rel_l2

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name):
    path = FIXTURES / f"{name}.pte"
    if not path.exists():
        pytest.skip(f"{name} not exported")
    return path


def test_inspect_decoder_json(capsys):
    main(["inspect", str(_fixture("decoder_q8_tiny"))])
    info = json.loads(capsys.readouterr().out)
    fwd = info["methods"]["forward"]
    assert [i["dtype"] for i in fwd["inputs"]] == ["float32", "int64"]
    assert fwd["inputs"][0]["shape"] == [1, 4, 64] and fwd["outputs"][0]["shape"] == [1, 256]
    assert info["constant_methods"]["get_max_context_len"] == 32
    assert info["constant_methods"]["use_sdpa_with_kv_cache"] is True
    assert fwd["host_graph_breaks"] == [] and fwd["unsupported_ops"] == []
    assert fwd["op_histogram"]["sdpa_with_kv_cache.default"] == 2
    mem = fwd["device_memory_bytes"]
    # 2 layers x k/v x [1, 32, 2, 16] f32 caches.
    assert mem["state"] == 2 * 2 * 32 * 2 * 16 * 4
    assert mem["weights"] > 0 and mem["total"] >= mem["weights"] + mem["state"]
    assert fwd["dispatches"] > 0
    assert info["policy"]["ok"] is True and "one delegate per method" in info["policy"]["rule"]


def test_run_round_trips_a_sequence(gpu, tmp_path, capsys):
    path = _fixture("decoder_f32_tiny")
    out = tmp_path / "out.npz"
    rc = main(["run", str(path), "--inputs", str(path.with_suffix(".npz")), "--output", str(out),
               "--tolerance", "1e-4"])
    assert rc == 0
    ref = np.load(path.with_suffix(".npz"))
    got = np.load(out)
    calls = sorted(k for k in ref.files if k.endswith("_output_0"))
    assert len(calls) > 3 and sorted(got.files) == calls
    for k in calls:
        assert rel_l2(got[k], ref[k]) <= 1e-4, k
    assert "rel-L2 vs reference" in capsys.readouterr().out


def test_run_with_the_reference_backend_needs_no_gpu(tmp_path, capsys):
    """`--backend reference` runs a whole decoder sequence on webpte's numpy interpreter (KV
    caches carried across calls) and meets the eager reference like the GPU does."""
    path = _fixture("decoder_q8_tiny")
    out = tmp_path / "out.npz"
    rc = main(["run", str(path), "--backend", "reference", "--inputs",
               str(path.with_suffix(".npz")), "--output", str(out), "--tolerance", "2e-3"])
    assert rc == 0
    ref, got = np.load(path.with_suffix(".npz")), np.load(out)
    calls = sorted(k for k in ref.files if k.endswith("_output_0"))
    assert len(calls) > 3 and sorted(got.files) == calls
    for k in calls:
        assert np.array_equal(got[k].argmax(-1), ref[k].argmax(-1)), k
    assert "rel-L2 vs reference" in capsys.readouterr().out


def test_run_reports_bad_inputs(gpu, tmp_path, capsys):
    path = _fixture("decoder_f32_tiny")
    bad = tmp_path / "bad.npz"
    np.savez(bad, input_0=np.ones((1, 3, 64), np.float32), input_1=np.zeros(1, np.int64))
    assert main(["run", str(path), "--inputs", str(bad)]) == 2
    assert "shape [1, 3, 64]" in capsys.readouterr().err
    far = tmp_path / "far.npz"
    np.savez(far, input_0=np.ones((1, 4, 64), np.float32), input_1=np.array([30], np.int64))
    assert main(["run", str(path), "--inputs", str(far)]) == 2
    assert "exceeds the context of 32" in capsys.readouterr().err


def test_corrupt_program_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.pte"
    data = bytearray(_fixture("decoder_q8_tiny").read_bytes())
    bad.write_bytes(bytes(data[: len(data) // 3]))
    assert main(["inspect", str(bad)]) == 2
    assert "malformed .pte" in capsys.readouterr().err


def test_tolerance_fails_what_it_cannot_vouch_for():
    """`run --tolerance` passes only calls whose every output has a reference of its shape
    within tolerance: no call, a missing or extra reference, another shape and a NaN fail."""
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    assert reference_problems([([x], [x + 1e-6])], 1e-4) == []
    cases = {
        "no call ran": [],
        "call 0 output 1 has no reference": [([x, x], [x])],
        "call 0 output 1: the npz holds a reference": [([x], [x, x])],
        "has shape [1, 4], its reference [4, 1]": [([x], [x.T])],
        "rel-L2 vs its reference is NaN": [([np.full_like(x, np.nan)], [x])],
        "rel-L2 1.00e+00 exceeds --tolerance": [([2 * x], [x])],
    }
    for message, ran in cases.items():
        problems = reference_problems(ran, 1e-4)
        assert len(problems) == 1 and message in problems[0], (message, problems)


def test_argmax_fails_another_greedy_token_within_tolerance():
    """`run --tolerance T --argmax` also fails a float output whose argmax along its last axis
    (the greedy token of logits) differs from its reference's, however small its rel-L2."""
    ref = np.array([[0.0, 1.0, 0.9999], [2.0, 0.0, 0.0]], np.float32)
    near = ref.copy()
    near[0, 2] += 2e-4          # row 0's top two swap; rel-L2 about 8e-5
    assert reference_problems([([near], [ref])], 1e-3) == []
    problems = reference_problems([([near], [ref])], 1e-3, argmax=True)
    assert problems == ["call 0 output 0: the argmax of 1 of 2 rows differs from its reference's"]
    assert reference_problems([([ref + 1e-6], [ref])], 1e-3, argmax=True) == []
    ids = np.array([[3, 1]], np.int32)     # integer outputs are compared by rel-L2 only
    assert reference_problems([([ids], [ids])], 0.0, argmax=True) == []


def test_run_with_tolerance_exits_1_on_nan_or_a_missing_reference(tmp_path, capsys):
    """On webpte's numpy interpreter: abs of a NaN input against a NaN reference (rel-L2 NaN,
    which `max(0, nan)` once passed), and an npz without references."""
    case = FIXTURES / "op_catalog" / "abs__mat"
    x = np.fromfile(case.with_suffix(".in0.bin"), "<f4").reshape(37, 41)
    x[3, 5] = np.nan
    nan_ref, no_ref = tmp_path / "nan.npz", tmp_path / "none.npz"
    np.savez(nan_ref, input_0=x, output_0=np.abs(x))
    np.savez(no_ref, input_0=x)
    pte = str(case.with_suffix(".pte"))
    for npz, message in ((nan_ref, "is NaN"), (no_ref, "call 0 output 0 has no reference")):
        rc = main(["run", pte, "--backend", "reference", "--inputs", str(npz), "--tolerance", "1"])
        assert rc == 1 and message in capsys.readouterr().err, npz
    assert main(["run", pte, "--backend", "reference", "--inputs", str(no_ref)]) == 0
