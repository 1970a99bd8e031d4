"""`webpte bench`: load time and per-call time of a program on this machine's adapter;
`--roofline`: time against the adapter's measured floor (webpte.roofline), for decode
kernel variants side by side and on several Vulkan drivers (`--adapters`)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

# Vulkan drivers `--adapters` names, each run in a subprocess of its own.
ICDS = {"lavapipe": "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
        "swiftshader": "/usr/lib/chromium/vk_swiftshader_icd.json"}


def bench_program(path: str, calls: int = 5, warmup: int = 1, method: str = "forward",
                  data=()) -> dict:
    """Measure one program (with its external data files, `data`): seconds to load (read +
    plan + upload + compile) and per call."""
    import numpy as np

    from .native import adapter_info
    from .plan.io import sample_inputs
    from .program import load

    t0 = time.perf_counter()
    prog = load(path, method, data=data)
    load_s = time.perf_counter() - t0
    arrays = sample_inputs(prog.plan, np.random.default_rng(0))
    for _ in range(warmup):
        prog.run(*arrays)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        prog.run(*arrays)
        times.append(time.perf_counter() - t)
    mem = prog.plan.memory()
    return {
        "program": str(path), "adapter": adapter_info().get("device", "?"),
        "load_s": round(load_s, 3), "calls": calls,
        "call_s_median": round(statistics.median(times), 4),
        "call_s_min": round(min(times), 4),
        "dispatches": len(prog.plan.dispatches), "kernels": len(prog.plan.kernels),
        "device_memory_mib": round(mem["total"] / 2**20, 1),
    }


def profile_program(path: str, top: int = 15, method: str = "forward", data=()) -> dict:
    """Time every dispatch alone (after one warm-up call) and total it by op and kernel."""
    import numpy as np

    from .plan.io import sample_inputs
    from .program import load

    prog = load(path, method, data=data)
    arrays = sample_inputs(prog.plan, np.random.default_rng(0))
    prog.run(*arrays)  # compiles every pipeline
    times = prog.executor.profile(arrays)
    by_op: dict[str, float] = {}
    by_kernel: dict[str, list] = {}
    for i, t in times:
        d = prog.plan.dispatches[i]
        by_op[d.op] = by_op.get(d.op, 0.0) + t
        entry = by_kernel.setdefault(prog.plan.kernels[d.kernel].name, [0, 0.0])
        entry[0] += 1
        entry[1] += t
    total = sum(t for _, t in times)
    kernels = sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "program": str(path), "dispatches": len(times), "total_s": round(total, 4),
        "by_op": {k: round(v, 4) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])},
        "top_kernels": [{"kernel": k, "dispatches": n, "s": round(t, 4)}
                        for k, (n, t) in kernels],
    }


def roofline_program(path: str, variants: list[str], calls: int = 5,
                     method: str = "forward", data=()) -> dict:
    """Ceilings of this adapter, then each decode variant's plan: call time (variants
    alternate call by call), family times, floor and percent of floor."""
    import numpy as np

    from .native import Executor, adapter_info, wgsl_features
    from .plan.io import sample_inputs
    from .planner.hints import variant_features
    from .program import _data_files, plan_method
    from .pte import open_source, read_program
    from .roofline import best_ceilings, family_times, measure_ceilings, report

    # The adapter's own hints of each kind a variant names are replaced by the variant's.
    features = wgsl_features()
    ceilings = measure_ceilings(features)
    sources, files = _data_files(data)
    sources = [open_source(path), *sources]
    prog = read_program(sources[0], files)
    exs = {v: Executor(plan_method(prog, method, variant_features(features, v)), sources)
           for v in variants}
    arrays = sample_inputs(next(iter(exs.values())).plan, np.random.default_rng(0))
    times: dict[str, list[float]] = {v: [] for v in variants}
    for ex in exs.values():
        ex.run(arrays)  # compiles every pipeline
    for _ in range(calls):
        for v, ex in exs.items():
            ex.reset()
            t = time.perf_counter()
            ex.run(arrays)
            times[v].append(time.perf_counter() - t)
    fams = {v: family_times(ex) for v, ex in exs.items()}
    # Probes again after the calls: the machine's load changes under a long run.
    ceilings = best_ceilings(ceilings, measure_ceilings(features))
    out = {"program": str(path), "adapter": adapter_info().get("device", "?"),
           "load": [round(x, 2) for x in os.getloadavg()],
           "variants": {v: report(ex.plan, ceilings, times[v], fams[v])
                        for v, ex in exs.items()}}
    if len(variants) > 1:
        base = statistics.median(times[variants[0]])
        out["ratios"] = {v: round(statistics.median(times[v]) / base, 3) for v in variants[1:]}
    return out


def _on_adapters(args) -> list[dict]:
    """Run this command with --roofline once per named Vulkan driver, one at a time."""
    results = []
    for name in args.adapters.split(","):
        if name == "page":
            from .bench_page import page_roofline

            results += page_roofline(args.programs, args.variants.split(","), args.calls)
            continue
        if name not in ICDS:
            raise SystemExit(f"adapter {name!r} is not one of {', '.join(ICDS)}, page")
        env = {**os.environ, "VK_ICD_FILENAMES": ICDS[name]}
        cmd = [sys.executable, "-m", "webpte.cli", "bench", "--roofline", "--json",
               "--calls", str(args.calls), "--variants", args.variants, *args.programs,
               *(a for d in args.data for a in ("--data", d))]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{name}: {proc.stderr.strip()[-2000:]}")
        results += [{"driver": name, **json.loads(line)}
                    for line in proc.stdout.splitlines() if line.startswith("{")]
    return results


def format_roofline(results: list[dict]) -> str:
    """One table: per driver, program and variant, the call then each kernel family."""
    from .roofline import DISPATCH, DOT_NAMES

    lines = []
    for r in results:
        c0 = next(iter(r["variants"].values()))["ceilings"]
        load = f" | load {' '.join(map(str, r['load']))}" if r.get("load") else ""
        dispatch = f", dispatch {c0[DISPATCH]} us" if DISPATCH in c0 else ""
        dots = [f"{name} {c0[f'dot_gmacs_{d}']}" for d, name in DOT_NAMES.items()
                if f"dot_gmacs_{d}" in c0] or [f"{c0['dot']} {c0['dot_gmacs']}"]
        lines.append(f"{r.get('driver', '-')}: {r['adapter']} | {r['program']} | read "
                     f"{c0['read_gbps']} GB/s, int8 {' / '.join(dots)} GMAC/s "
                     f"(floor: {c0['dot']}){dispatch}{load}")
        lines.append(f"  {'variant / family':34} {'n':>5} {'MB':>8} {'GMAC':>7} "
                     f"{'ms':>8} {'floor ms':>8} {'% floor':>7} {'loads MB':>8} "
                     f"{'serial':>8} {'% serial':>8}")
        for v, rep in r["variants"].items():
            rows = [(f"{v} (call)", rep["call"])] + [(f"  {k}", f)
                                                    for k, f in rep["families"].items()]
            for name, f in rows:
                lines.append(f"  {name:34} {f['dispatches']:>5} {f['mb']:>8} {f['gmac']:>7} "
                             f"{f['time_ms'] if f['time_ms'] is not None else '-':>8} "
                             f"{f['floor_ms']:>8} {f['pct_floor'] or '-':>7} "
                             f"{f.get('loaded_mb', '-'):>8} {f.get('serial_floor_ms', '-'):>8} "
                             f"{f.get('pct_serial_floor') or '-':>8}")
            if rep["call"].get("pct_floor_best") is not None:
                lines.append(f"  {v} fastest call: {rep['call']['time_ms_min']} ms, "
                             f"{rep['call']['pct_floor_best']}% of floor")
            if rep["call"].get("dispatch_ms") is not None:
                lines.append(f"  {v} floor + {rep['call']['dispatches']} dispatches at "
                             f"{rep['ceilings'][DISPATCH]} us: "
                             f"{rep['call']['pct_floor_with_dispatches']}% of the median call")
            if rep["call"].get("pct_serial_floor_with_dispatches") is not None:
                lines.append(f"  {v} serial floor (every lane's loads, then its MACs) + "
                             f"dispatches: "
                             f"{rep['call']['pct_serial_floor_with_dispatches']}% of the "
                             f"median call")
        for v, h in r.get("host_ms", {}).items():
            lines.append(f"  {v} call on the host (median ms): " + ", ".join(
                f"{k} {ms}" for k, ms in h.items()))
        for v, ratio in r.get("ratios", {}).items():
            lines.append(f"  time {v} / {next(iter(r['variants']))}: {ratio}")
    lines += _page_vs_native(results)
    return "\n".join(lines)


def _page_vs_native(results: list[dict]) -> list[str]:
    """Page call time over native SwiftShader's (the same adapter type), per program/variant."""
    native = {(r["program"], v): rep["call"] for r in results
              if r.get("driver") == "swiftshader" for v, rep in r["variants"].items()}
    # The fastest calls' ratio too: the two run one after the other, under the machine's load.
    return [f"page / native swiftshader, {r['program']} {v}: "
            f"{rep['call']['time_ms'] / nat['time_ms']:.3f} "
            f"(fastest calls {rep['call']['time_ms_min'] / nat['time_ms_min']:.3f})"
            for r in results if r.get("driver") == "page"
            for v, rep in r["variants"].items() if (nat := native.get((r["program"], v)))]


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="time loading and calls of programs")
    b.add_argument("programs", nargs="+")
    b.add_argument("--data", action="append", default=[], metavar="FILE",
                   help="an external data file (.ptd) of the programs; repeatable (native "
                        "runs only)")
    b.add_argument("--calls", type=int, default=5)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--profile", action="store_true",
                   help="time each dispatch alone and total by op and kernel")
    b.add_argument("--roofline", action="store_true",
                   help="measure the adapter's read and int8 dot ceilings and print time, "
                        "floor and %% of floor per call and kernel family")
    b.add_argument("--variants", default="skinny",
                   help="plans to compare, with --roofline (comma separated): a decode "
                        "kernel (skinny, splitk) or planner hints joined by + "
                        "(attention:tiled, attention:serial+q8_decode:splitk)")
    b.add_argument("--adapters", default=None,
                   help=f"run --roofline on each of these Vulkan drivers "
                        f"({','.join(ICDS)}) in a subprocess, and `page` in headless "
                        f"Chromium (needs dist/), and print them side by side")
    b.add_argument("--json", action="store_true", help="JSON lines only (with --roofline)")
    b.add_argument("--page-vs-native", action="store_true",
                   help="alternate calls in headless Chromium and natively on SwiftShader's "
                        "Vulkan ICD (the page's adapter type), one by one, and print the "
                        "per-pair page / native ratio (needs dist/)")
    b.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    if args.data and (args.page_vs_native or "page" in (args.adapters or "").split(",")):
        raise SystemExit("--data is for native runs; the page benches take no data files")
    if args.page_vs_native:
        # Natively on the page's adapter type: chosen before wgpu makes its instance.
        os.environ.setdefault("VK_ICD_FILENAMES", ICDS["swiftshader"])
        from .bench_page import page_vs_native

        variant = "" if args.variants == "skinny" else args.variants
        for path in args.programs:
            r = page_vs_native(path, args.calls, variant)
            print(json.dumps(r) if args.json else (
                f"{r['program']}: page ({r['page_adapter']}, {r['dispatches']['page']} "
                f"dispatches) vs native ({r['native_adapter']}, {r['dispatches']['native']}), "
                f"{r['calls']} alternating pairs at load {' '.join(map(str, r['load']))}: "
                f"page {r['page_ms_median']} ms, native {r['native_ms_median']} ms median; "
                f"page / native per pair {r['ratio_median']} median (quartiles "
                f"{r['ratio_quartiles'][0]}-{r['ratio_quartiles'][1]}), ratio of medians "
                f"{r['ratio_of_medians']}"))
            sys.stdout.flush()
        return 0
    if args.adapters:
        print(format_roofline(_on_adapters(args)))
        return 0
    if args.roofline:
        for path in args.programs:
            result = roofline_program(path, args.variants.split(","), args.calls,
                                      data=args.data)
            print(json.dumps(result) if args.json else format_roofline([result]))
            sys.stdout.flush()
        return 0
    for path in args.programs:
        result = (profile_program(path, data=args.data) if args.profile
                  else bench_program(path, args.calls, args.warmup, data=args.data))
        print(json.dumps(result))
        sys.stdout.flush()
    return 0
