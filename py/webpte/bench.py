"""`webpte bench`: load time and per-call time of a program on this machine's adapter."""

from __future__ import annotations

import json
import statistics
import sys
import time


def _inputs_for(plan, rng):
    import numpy as np

    arrays = []
    for spec in plan.inputs:
        if spec.dtype.startswith("float"):
            arrays.append(rng.standard_normal(spec.shape).astype(spec.dtype))
        else:
            arrays.append(np.zeros(spec.shape, spec.dtype))
    return arrays


def bench_program(path: str, calls: int = 5, warmup: int = 1, method: str = "forward") -> dict:
    """Measure one program: seconds to load (read + plan + upload + compile) and per call."""
    import numpy as np

    from .native import adapter_info
    from .program import load

    t0 = time.perf_counter()
    prog = load(path, method)
    load_s = time.perf_counter() - t0
    arrays = _inputs_for(prog.plan, np.random.default_rng(0))
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


def profile_program(path: str, top: int = 15, method: str = "forward") -> dict:
    """Time every dispatch alone (after one warm-up call) and total it by op and kernel."""
    import numpy as np

    from .program import load

    prog = load(path, method)
    arrays = _inputs_for(prog.plan, np.random.default_rng(0))
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


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="time loading and calls of programs")
    b.add_argument("programs", nargs="+")
    b.add_argument("--calls", type=int, default=5)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--profile", action="store_true",
                   help="time each dispatch alone and total by op and kernel")
    b.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    for path in args.programs:
        result = (profile_program(path) if args.profile
                  else bench_program(path, args.calls, args.warmup))
        print(json.dumps(result))
        sys.stdout.flush()
    return 0
