"""`webpte bench --adapters ...,page`: the page's row counts the same plans as the native rows.
The page itself is stood in for by a recorder of the job it is given (the real page run is
`webpte bench --roofline --adapters swiftshader,page PTE`, a benchmark, not a test)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from conftest import FIXTURES
from webpte import bench_page
from webpte.bench import format_roofline
from webpte.kernels.quantized.linear_q8 import DECODE_HINT
from webpte.program import plan_method
from webpte.pte import read_program
from webpte.roofline import family, report

PTE = FIXTURES / "decoder_q8_tiny.pte"


def test_the_page_row_is_reported_from_the_plans_it_ran(monkeypatch):
    seen: dict = {}

    def fake_node(*args, timeout=0):
        if args == ("features",):
            return {"features": ["packed_4x8_integer_dot_product", DECODE_HINT + "splitk"],
                    "adapter": {"vendor": "google", "architecture": "swiftshader"}}
        job = json.loads(Path(args[1]).read_text())
        d = Path(job["dir"])
        seen["plans"] = {v: (d / f).read_text() for v, f in job["programs"][0]["plans"].items()}
        seen["inputs"] = [(d / t["file"]).stat().st_size for t in job["programs"][0]["inputs"]]
        seen["families"] = job["programs"][0]["families"]
        return {"probes": {p["name"]: 0.5 for p in job["probes"]},
                "programs": [{"call_s": {"skinny": [0.02, 0.01, 0.03]},
                              "host_ms": {"skinny": [
                                  {"encode": e, "wait": 15.0, "copy": 0.1, "worker": 1.0}
                                  for e in (0.5, 0.25, 2.0)]},
                              "family_s": {"skinny": {"rope": 0.002}}}]}

    monkeypatch.setattr(bench_page, "_node", fake_node)
    [r] = bench_page.page_roofline([str(PTE)], ["skinny"], calls=3)
    # The page's own decode hint is replaced by the variant's, as natively.
    plan = plan_method(read_program(PTE.read_bytes()), "forward",
                       frozenset({"packed_4x8_integer_dot_product", DECODE_HINT + "skinny"}))
    assert seen["plans"]["skinny"] == plan.to_json()
    assert seen["inputs"] == [math.prod(s.shape) * np.dtype(s.dtype).itemsize
                              for s in plan.inputs]
    # Every dispatch is timed in its family's submit, in plan order.
    fams = seen["families"]["skinny"]
    assert sorted(i for idx in fams.values() for i in idx) == list(range(len(plan.dispatches)))
    assert all(family(plan, plan.dispatches[i]) == name for name, idx in fams.items() for i in idx)
    want = report(plan, r["variants"]["skinny"]["ceilings"], [0.02, 0.01, 0.03],
                  {"rope": 0.002})
    assert want["families"]["rope"]["time_ms"] == 2.0
    assert r["variants"]["skinny"] == want
    assert want["call"]["time_ms"] == 20.0 and r["driver"] == "page"
    native = {"driver": "swiftshader", "program": str(PTE), "adapter": "x",
              "variants": {"skinny": report(plan, want["ceilings"], [0.016], {})}}
    text = format_roofline([native, r])
    assert f"page / native swiftshader, {PTE} skinny: 1.250 (fastest calls 0.625)" in text
    assert ("skinny call on the host (median ms): encode 0.5, wait 15.0, copy 0.1, worker 1.0"
            in text)


def test_page_and_native_calls_alternate_in_one_run(monkeypatch):
    """`webpte bench --page-vs-native`: the page serves one call per request while native
    calls run in between, each side on its own plan of the program (the same kernels)."""
    import shutil

    if not (bench_page.ROOT / "dist" / "index.js").exists() or shutil.which("node") is None:
        import pytest

        pytest.skip("needs a built dist/ and node")
    r = bench_page.page_vs_native(str(PTE), calls=3)
    assert r["calls"] == 3 and r["dispatches"]["page"] == r["dispatches"]["native"]
    assert "swiftshader" in r["page_adapter"].lower()
    for key in ("native_ms_median", "page_ms_median", "ratio_median", "ratio_of_medians"):
        assert math.isfinite(r[key]) and r[key] > 0, key
    lo, hi = r["ratio_quartiles"]
    assert lo <= r["ratio_median"] <= hi
