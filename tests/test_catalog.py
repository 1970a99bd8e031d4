"""Tier 1: the committed subset of ExecuTorch 1.5.1's WebGPU op-test catalog
(tests/fixtures/op_catalog, made by `tools/gen_op_catalog.py --subset variants`: per op the
smallest case, the largest of at most 1 MiB and every case that plans another kernel variant,
tools/catalog_variants.py) passes natively, natively planned for the other adapter type (a
GPU's kernels on a CPU adapter and the reverse), and on webpte's numpy interpreter, compared as
the catalog says (py/webpte/conformance.py). The full catalog runs with `make conformance`
(README: table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import webpte.program
from webpte.cli import main
from webpte.conformance import (
    CatalogError,
    _Loaded,
    compare,
    format_table,
    load_manifest,
    read_raw,
    run_catalog,
    run_entry,
)
from webpte.errors import PlanError
from webpte.native.executor import POISON_WORD
from webpte.plan.io import from_storage_bytes, to_storage_bytes
from webpte.plan.model import IOSpec
from webpte.program import inspect

CATALOG = Path(__file__).parent / "fixtures" / "op_catalog"
ENTRIES = load_manifest(CATALOG)
PTES = sorted({e["pte"] for e in ENTRIES})


def _detail(r) -> str:
    return f"{r.op}/{r.case}: {r.status} {r.detail} first mismatches {r.first_mismatches}"


def test_the_subset_covers_every_catalog_op():
    assert len({e["op"] for e in ENTRIES}) == 87
    assert len(PTES) > 87   # the smallest case of each op, and more where the kernels differ


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


def _other_adapters_features() -> frozenset[str]:
    """This device's language features with the hints of the other adapter type: a GPU's
    on a CPU adapter (lavapipe in CI), lavapipe's on a GPU."""
    from webpte.native import adapter_info, wgsl_features
    from webpte.planner.hints import adapter_hints

    info = adapter_info()
    kind, device = str(info.get("adapter_type", "")), str(info.get("device", ""))
    other = adapter_hints("DiscreteGPU") if kind == "CPU" else adapter_hints("CPU", "llvmpipe")
    return wgsl_features() - adapter_hints(kind, device) | other


@pytest.mark.parametrize("pte", PTES)
def test_catalog_case_planned_for_the_other_adapter_type(gpu, monkeypatch, pte):
    """The kernels the other adapter type plans (tiled and split attention, split-K linears,
    bitonic top-k on a CPU adapter) pass here too, where they differ from this adapter's."""
    from webpte.native import wgsl_features

    plan_method = webpte.program.plan_method
    other = _other_adapters_features()
    prog = webpte.program.read_program((CATALOG / pte).read_bytes())
    entry = next(e for e in ENTRIES if e["pte"] == pte)
    shapes = ([tuple(x["shape"]) for x in entry["inputs"]]
              if any(io.dynamic for io in prog.method("forward").inputs) else None)
    kernels = [{k.wgsl for k in plan_method(prog, "forward", f, input_shapes=shapes).kernels}
               for f in (wgsl_features(), other)]
    if kernels[0] == kernels[1]:
        pytest.skip("both adapter types plan the same kernels")
    monkeypatch.setattr(webpte.program, "plan_method",
                        lambda p, m="forward", features=(), **kw: plan_method(p, m, other, **kw))
    loaded = _Loaded(CATALOG, "webgpu")
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


def test_an_unwritten_element_fails_the_comparison():
    """The poison NaN matches no golden, not even a NaN; a poisoned bool word fails the read
    (it would read as True and pass gt's golden)."""
    poisoned = np.array([POISON_WORD, POISON_WORD], np.uint32).view(np.float32)
    bad, _ = compare(poisoned, np.array([np.nan, 1.0], np.float32), "float32", 1e-3, 1e-3)
    assert bad.tolist() == [True, True]
    spec = IOSpec(0, "bool", (2,), "bool", "gt")
    with pytest.raises(PlanError, match="bool output gt holds the word 0x7fc0dead at element 1"):
        from_storage_bytes(np.array([1, POISON_WORD], np.uint32).tobytes(), spec)
    words = np.frombuffer(to_storage_bytes(np.array([0, 2]), spec, "x"), np.uint32)
    assert words.tolist() == [0, 1]   # a bool input is stored as 0/1 words


class _Given:
    """A stand-in for `_Loaded` that gives these outputs."""

    def __init__(self, outputs):
        self.outputs = outputs

    def outputs_for(self, entry):
        return self.outputs


def _entry(op: str) -> dict:
    return next(e for e in ENTRIES if e["op"] == op)


def test_another_shape_of_the_same_size_fails():
    matrix = next(e for e in ENTRIES if len(set(e["golden"]["shape"])) == 2 == len(
        e["golden"]["shape"]))
    one = next(e for e in ENTRIES if e["golden"]["shape"] == [1])
    for e in (matrix, one):   # transposed; (1,) as a 0-d array
        golden = read_raw(CATALOG, e["golden"])
        assert run_entry(CATALOG, e, _Given([golden])).status == "pass"
        wrong = golden.T.copy() if golden.ndim == 2 else golden.reshape(())
        r = run_entry(CATALOG, e, _Given([wrong]))
        assert r.status == "mismatch" and r.detail.startswith(f"shape {list(wrong.shape)}"), r


def test_a_kernel_that_writes_nothing_fails(gpu, monkeypatch):
    """With every kernel returning at once, the poisoned outputs fail each case: gt and eq
    (goldens True and False: an unpoisoned buffer read False and passed eq) and a float op."""
    plan_method = webpte.program.plan_method

    def writing_nothing(*args, **kwargs):
        plan = plan_method(*args, **kwargs)
        for k in plan.kernels:   # the bindings stay declared and used
            at = k.wgsl.index("{", k.wgsl.index(f"fn {k.entry}("))
            k.wgsl = f"{k.wgsl[:at + 1]}\n  if (true) {{ return; }}{k.wgsl[at + 1:]}"
        return plan

    monkeypatch.setattr(webpte.program, "plan_method", writing_nothing)
    for op in ("gt", "eq", "add"):
        e = _entry(op)
        r = run_entry(CATALOG, e, _Loaded(CATALOG, "webgpu"))
        assert r.status != "pass", _detail(r)
        assert "no kernel wrote it" in r.detail if op != "add" else r.status == "mismatch"


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


def test_conformance_exits_nonzero_on_an_empty_selection(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("[]")
    assert main(["conformance", str(tmp_path), "--backend", "reference"]) == 1
    assert "no catalog case selected" in capsys.readouterr().err
    assert main(["conformance", str(CATALOG), "--backend", "reference", "--ops", "nosuch"]) == 2
    assert "holds no case of nosuch" in capsys.readouterr().err
