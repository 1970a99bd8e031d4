"""Tier 1: the committed subset of ExecuTorch 1.5.1's WebGPU op-test catalog
(tests/fixtures/op_catalog: one smallest case per op, made by
`tools/gen_op_catalog.py --subset smallest`) passes natively and on webpte's numpy
interpreter, compared as the catalog says (py/webpte/conformance.py). The full catalog runs
with `make conformance` (README: table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from webpte.conformance import (
    CatalogError,
    _Loaded,
    compare,
    format_table,
    load_manifest,
    run_catalog,
    run_entry,
)
from webpte.program import inspect

CATALOG = Path(__file__).parent / "fixtures" / "op_catalog"
ENTRIES = load_manifest(CATALOG)
PTES = sorted({e["pte"] for e in ENTRIES})


def _detail(r) -> str:
    return f"{r.op}/{r.case}: {r.status} {r.detail} first mismatches {r.first_mismatches}"


def test_the_subset_covers_every_catalog_op():
    assert len({e["op"] for e in ENTRIES}) == 87
    assert len(PTES) == 87


@pytest.mark.parametrize("backend", ["webgpu", "reference"])
@pytest.mark.parametrize("pte", PTES)
def test_catalog_case(request, backend, pte):
    """Every entry of the program passes on the GPU and on the numpy interpreter."""
    if backend == "webgpu":
        request.getfixturevalue("gpu")
    loaded = _Loaded(CATALOG, backend)
    for e in (e for e in ENTRIES if e["pte"] == pte):
        r = run_entry(CATALOG, e, loaded)
        assert r.status == "pass", _detail(r)


@pytest.mark.parametrize("pte", PTES)
def test_inspect_lists_no_unsupported_op(pte):
    info = inspect(CATALOG / pte)
    for name, m in info["methods"].items():
        assert m["unsupported_ops"] == [], f"{pte} [{name}]"
        assert "plan_error" not in m, f"{pte} [{name}]: {m.get('plan_error')}"


def test_comparison_rules():
    g = np.array([1.0, -2.0, np.nan, np.inf], np.float32)
    bad, worst = compare(np.array([1.0009, -2.0, np.nan, np.inf]), g, "float32", 1e-3, 0.0)
    assert not bad.any() and worst == pytest.approx(9e-4, rel=1e-3)
    bad, _ = compare(np.array([1.002, -2.0, 0.0, -np.inf]), g, "float32", 1e-3, 0.0)
    assert bad.tolist() == [True, False, True, True]
    bad, _ = compare(np.array([True, False]), np.array([1, 1], np.int8), "bool", 0, 0)
    assert bad.tolist() == [False, True]


def test_a_broken_catalog_is_a_typed_error(tmp_path):
    with pytest.raises(CatalogError, match="no manifest.json"):
        load_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(CatalogError, match="not JSON"):
        load_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps([{"op": "add"}]))
    with pytest.raises(CatalogError, match="entry 0"):
        load_manifest(tmp_path)


def test_missing_and_escaping_files_are_reported_per_case(tmp_path):
    entry = dict(ENTRIES[0])
    entry["golden"] = {**entry["golden"], "path": "../outside.bin"}
    entry2 = {**ENTRIES[0], "golden": {**ENTRIES[0]["golden"], "path": "gone.bin"}}
    (tmp_path / "manifest.json").write_text(json.dumps([entry, entry2]))
    results = run_catalog(tmp_path, backend="reference")
    assert [r.status for r in results] == ["error", "error"]
    assert "leaves the catalog folder" in results[0].detail + results[1].detail
    assert "missing catalog file gone.bin" in results[0].detail + results[1].detail
    assert "summary: 0/1 ops and 0/2 cases pass" in format_table(results)
