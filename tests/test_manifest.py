"""Tier 0: `webpte inspect --manifest seed000` — a compile manifest per program method in the
shape of seed 000 (shared/docs/gemma4-31b.md), with the one-device-function policy checked."""

from __future__ import annotations

import json
from pathlib import Path

from webpte.cli import main
from webpte.manifest import POLICY, _method_entry, seed000_manifest
from webpte.pte import read_program

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_model_folder_lists_every_program_on_one_device_function():
    out = seed000_manifest(FIXTURES / "tiny_vlm")
    assert set(out["metadata"]) == {"vision_q8.pte", "decoder_q8.pte"}
    assert out["graphs_with_breaks"] == [] and out["policy"] == POLICY
    vision = out["metadata"]["vision_q8.pte"]
    assert vision["inputs"][0]["shape"] == [1, 3, 512, 512]
    assert vision["outputs"][0]["shape"] == [1, 64, 64]
    for entry in out["metadata"].values():
        (stats,) = entry["subgraph"]["stats"]
        assert stats["device_func_count"] == 1 and stats["host_op_reason"] == {}
        assert entry["alloc_per_node"][0] > 0 and entry["num_devices"] == 1


def test_kernel_calls_without_a_unit_are_breaks_with_reasons():
    prog = read_program((FIXTURES / "op_catalog" / "add__regular_3d.pte").read_bytes())
    prog.method("forward").host_ops.append("aten::frobnicate.out")
    entry = _method_entry(prog, "forward", 3)
    (stats,) = entry["subgraph"]["stats"]
    assert stats["compile_id"] == 3 and stats["device_func_count"] == 0
    assert "no webpte unit runs" in stats["host_op_reason"]["aten::frobnicate.out"]
    assert entry["alloc_per_node"] == [0]


def test_the_stock_gemma_export_runs_on_one_device_function():
    """50 delegates and 102 portable kernel calls between them: all in one plan, no break."""
    out = seed000_manifest(FIXTURES / "gemma4" / "gemma4_stock.pte")
    (stats,) = out["metadata"]["gemma4_stock.pte"]["subgraph"]["stats"]
    assert out["graphs_with_breaks"] == []
    assert stats["device_func_count"] == 1 and stats["host_op_reason"] == {}
    assert stats["delegate_calls"] == 50 and stats["host_kernel_calls_on_device"] == 102


def test_cli_prints_the_manifest(capsys):
    assert main(["inspect", "--manifest", "seed000",
                 str(FIXTURES / "op_catalog" / "add__regular_3d.pte")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["metadata"]) == ["add__regular_3d.pte"]
    assert [i["shape"] for i in out["metadata"]["add__regular_3d.pte"]["inputs"]] == [
        [5, 7, 11], [5, 7, 11]]
