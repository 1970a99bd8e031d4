"""Time one program under this checkout and under an earlier revision, calls alternating.

    .venv/bin/python tools/bench_vs_rev.py --rev 1e9a597 --pairs 10 PROGRAM.pte

The revision is checked out into a temporary git worktree; one worker process runs each side's
default plan for the adapter (its own planner, kernels and hints), both loaded before the
first timed call. Calls alternate one by one, the order swapped every pair, so the machine's
drift (this one's speed moves by up to 1.5x between minutes) falls on both sides alike. Prints
each side's median and fastest call, the per-pair ratio (median and quartiles) and the largest
difference between the two sides' outputs for the same inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(program: str, out: str) -> None:
    """Serve timed calls of `program` on stdin/stdout: one line in, one time out."""
    import time

    import numpy as np

    from webpte.native import Executor, wgsl_features
    from webpte.program import plan_method
    from webpte.pte import open_source, read_program

    data = open_source(program)
    ex = Executor(plan_method(read_program(data), "forward", wgsl_features()), data)
    # Built here, not imported: the worker runs each revision's package, whatever it names.
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.startswith("float")
              else np.zeros(s.shape, s.dtype) for s in ex.plan.inputs]
    np.save(out, ex.run(arrays)[0])  # compiles every pipeline, and the output to compare
    print(json.dumps({"dispatches": len(ex.plan.dispatches)}), flush=True)
    for _ in sys.stdin:
        t = time.perf_counter()
        ex.run(arrays)
        print(time.perf_counter() - t, flush=True)


def _start(pkg: Path, program: str, out: Path) -> tuple[subprocess.Popen, dict]:
    env = dict(os.environ, PYTHONPATH=str(pkg))
    p = subprocess.Popen([sys.executable, __file__, "--worker", program, "--out", str(out)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"the worker for {pkg} stopped before its first call (see above)")
    return p, json.loads(line)


def _call(p: subprocess.Popen) -> float:
    p.stdin.write("run\n")
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise SystemExit("a worker stopped during a call (see above)")
    return float(line)


def compare(rev: str, program: str, pairs: int) -> None:
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="webpte-rev-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                       check=True, capture_output=True)
        procs = {}
        try:
            sides = {f"rev {rev}": tree / "py", "this checkout": ROOT / "py"}
            for name, pkg in sides.items():
                procs[name] = _start(pkg, program, Path(tmp) / f"{len(procs)}.npy")
                print(f"{name}: {procs[name][1]['dispatches']} dispatches", flush=True)
            times: dict[str, list[float]] = {name: [] for name in procs}
            names = list(procs)
            for i in range(pairs):
                for name in (names if i % 2 == 0 else names[::-1]):
                    times[name].append(_call(procs[name][0]))
                old, new = (times[n][-1] for n in names)
                print(f"pair {i + 1}: {old:.3f} s / {new:.3f} s = {old / new:.2f}", flush=True)
            outs = [np.load(Path(tmp) / f"{i}.npy") for i in range(2)]
        finally:
            for p, _ in procs.values():
                p.stdin.close()
                p.wait()
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False, capture_output=True)
    old, new = (times[n] for n in names)
    ratios = [a / b for a, b in zip(old, new)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    for name, ts in times.items():
        print(f"{name}: median {statistics.median(ts):.3f} s, fastest {min(ts):.3f} s")
    print(f"rev / this checkout, per pair: median {statistics.median(ratios):.2f} "
          f"(quartiles {q[0]:.2f}-{q[2]:.2f}); ratio of medians "
          f"{statistics.median(old) / statistics.median(new):.2f}, of fastest "
          f"{min(old) / min(new):.2f}")
    same = outs[0].shape == outs[1].shape
    diff = float(np.abs(outs[0] - outs[1]).max()) if same else float("nan")
    largest = float(np.abs(outs[1]).max())
    print(f"outputs: max |difference| {diff:.3g} (largest |value| {largest:.3g})"
          + (", bitwise equal" if same and outs[0].tobytes() == outs[1].tobytes() else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program")
    ap.add_argument("--rev", help="git revision to compare with")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.program, a.out)
    elif not a.rev:
        ap.error("--rev is required")
    elif a.pairs < 1:
        ap.error("--pairs must be at least 1")
    else:
        compare(a.rev, a.program, a.pairs)


if __name__ == "__main__":
    main()
