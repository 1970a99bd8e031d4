"""The page column of `webpte bench --roofline --adapters ...,page`.

Python makes every plan, as it does for the page: the ceiling probes and each decode variant
of each program, for the page's own WGSL features (asked of headless Chromium first). The
page (tools/bench_page.mjs, over the built dist/) only times them; the floors, families and
percentages are computed here from the same plans, so the page's row and the native rows
count the same work. The page times calls through its worker, and each kernel family's
dispatches in one submit on an Executor in the page (as `roofline.family_times` does
natively); it splits each call's time on the host (`host_ms`: encode, wait for the GPU and
the map, copy, worker messages; medians).

Needs a development checkout (tools/, a built dist/), node with playwright-core and Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "bench_page.mjs"


def _node(*args: str, timeout: float = 1800) -> dict:
    if not SCRIPT.exists() or not (ROOT / "dist" / "index.js").exists():
        raise SystemExit("the page bench needs a development checkout with dist/ built "
                         "(`npm ci && npm run build`)")
    if shutil.which("node") is None:
        raise SystemExit("the page bench needs node (`make web-deps`)")
    proc = subprocess.run(["node", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"page: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def page_roofline(programs: list[str], variants: list[str], calls: int,
                  tries: int = 3) -> list[dict]:
    """One result per program, shaped like `bench.roofline_program`'s, for the page."""
    import numpy as np

    from .plan.io import sample_inputs
    from .planner.hints import variant_features
    from .program import plan_method
    from .pte import open_source, read_program
    from .roofline import ceiling_probes, ceilings_from, family, report

    info = _node("features")
    features = frozenset(info["features"])
    probes = ceiling_probes(features)
    with tempfile.TemporaryDirectory(prefix="webpte-bench-page-") as tmp:
        d = Path(tmp)
        job: dict = {"dir": str(d), "tries": tries, "probes": [], "programs": []}
        for name, plan, _ in probes:
            (d / f"{name}.json").write_text(plan.to_json())
            job["probes"].append({"name": name, "plan": f"{name}.json"})
        plans = []
        for i, path in enumerate(programs):
            prog = read_program(open_source(path))
            by_variant = {v: plan_method(prog, "forward", variant_features(features, v))
                          for v in variants}
            plans.append(by_variant)
            shutil.copyfile(path, d / f"p{i}.pte")
            entry = {"pte": f"p{i}.pte", "plans": {}, "inputs": [], "calls": calls,
                     "families": {}}
            for v, plan in by_variant.items():
                (d / f"p{i}_{v}.json").write_text(plan.to_json())
                entry["plans"][v] = f"p{i}_{v}.json"
                fams: dict[str, list[int]] = {}
                for j, disp in enumerate(plan.dispatches):
                    fams.setdefault(family(plan, disp), []).append(j)
                entry["families"][v] = fams
            arrays = sample_inputs(next(iter(by_variant.values())), np.random.default_rng(0))
            for j, a in enumerate(arrays):
                (d / f"p{i}_in{j}.bin").write_bytes(a.tobytes())
                entry["inputs"].append({"file": f"p{i}_in{j}.bin", "dtype": str(a.dtype),
                                        "shape": list(a.shape)})
            job["programs"].append(entry)
        (d / "job.json").write_text(json.dumps(job))
        measured = _node("run", str(d / "job.json"))
    ceilings = ceilings_from(probes, measured["probes"])
    adapter = info["adapter"]
    name = " ".join(str(adapter.get(k) or "") for k in ("vendor", "architecture")).strip()
    results = []
    for path, by_variant, m in zip(programs, plans, measured["programs"]):
        times = m["call_s"]
        out = {"driver": "page", "program": str(path), "adapter": name or "?",
               "variants": {v: report(plan, ceilings, times[v], m["family_s"][v])
                            for v, plan in by_variant.items()},
               "host_ms": {v: {k: round(statistics.median(c[k] for c in calls_ms), 2)
                               for k in ("encode", "wait", "copy", "worker")}
                           for v, calls_ms in m["host_ms"].items()}}
        if len(variants) > 1:
            base = statistics.median(times[variants[0]])
            out["ratios"] = {v: round(statistics.median(times[v]) / base, 3)
                             for v in variants[1:]}
        results.append(out)
    return results


def page_vs_native(path: str, calls: int = 21, variant: str = "") -> dict:
    """One program's calls in the page and natively, alternating one by one (the order
    swapped every pair), so both see the same moment of a shared machine. The native half
    runs in this process, on SwiftShader's Vulkan ICD when `webpte bench --page-vs-native`
    chose it: the page's adapter type. Each side runs its own plan for its own features
    (the same kernels for a CPU adapter). Reports per-pair page / native."""
    import numpy as np

    from .native import Executor, adapter_info, wgsl_features
    from .plan.io import sample_inputs
    from .planner.hints import variant_features
    from .program import plan_method
    from .pte import open_source, read_program

    info = _node("features")
    data = open_source(path)
    prog = read_program(data)
    page_plan = plan_method(prog, "forward", variant_features(frozenset(info["features"]),
                                                               variant))
    native_plan = plan_method(prog, "forward", variant_features(wgsl_features(), variant))
    arrays = sample_inputs(native_plan, np.random.default_rng(0))
    ex = Executor(native_plan, data)
    ex.run(arrays)   # compiles every pipeline
    with tempfile.TemporaryDirectory(prefix="webpte-bench-pair-") as tmp:
        d = Path(tmp)
        shutil.copyfile(path, d / "p0.pte")
        (d / "p0.json").write_text(page_plan.to_json())
        entry = {"pte": "p0.pte", "plans": {"v": "p0.json"}, "inputs": []}
        for j, a in enumerate(arrays):
            (d / f"in{j}.bin").write_bytes(a.tobytes())
            entry["inputs"].append({"file": f"in{j}.bin", "dtype": str(a.dtype),
                                    "shape": list(a.shape)})
        (d / "job.json").write_text(json.dumps({"dir": str(d), "programs": [entry]}))
        proc = subprocess.Popen(["node", str(SCRIPT), "serve", str(d / "job.json")], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            if json.loads(proc.stdout.readline() or "{}").get("ready") is not True:
                raise SystemExit("page: the bench page did not load the program")

            def page_call() -> float:
                proc.stdin.write("0 v\n")
                proc.stdin.flush()
                return float(json.loads(proc.stdout.readline())["s"])

            def native_call() -> float:
                ex.reset()
                t = time.perf_counter()
                ex.run(arrays)
                return time.perf_counter() - t

            page_call()   # the first call after load warms the worker's paths
            pairs = []
            for i in range(calls):
                if i % 2:
                    p_s = page_call()
                    n_s = native_call()
                else:
                    n_s = native_call()
                    p_s = page_call()
                pairs.append((n_s, p_s))
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
    ratios = sorted(p / n for n, p in pairs)
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"program": str(path), "native_adapter": adapter_info().get("device", "?"),
            "page_adapter": " ".join(str(info["adapter"].get(k) or "")
                                     for k in ("vendor", "architecture")).strip(),
            "dispatches": {"native": len(native_plan.dispatches),
                           "page": len(page_plan.dispatches)},
            "calls": calls, "load": [round(x, 2) for x in os.getloadavg()],
            "native_ms_median": round(1e3 * statistics.median(n for n, _ in pairs), 2),
            "page_ms_median": round(1e3 * statistics.median(p for _, p in pairs), 2),
            "ratio_median": round(statistics.median(ratios), 3),
            "ratio_quartiles": [round(q[0], 3), round(q[2], 3)],
            "ratio_of_medians": round(statistics.median(p for _, p in pairs)
                                      / statistics.median(n for n, _ in pairs), 3)}
