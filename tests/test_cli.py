"""`webpte inspect` and `webpte run` on committed fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from webpte.cli import main
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
