"""`webpte fuzz` (also `python -m webpte.fuzz`)."""

from __future__ import annotations

import argparse
import resource
import sys

from .runner import WEIGHTS, Fuzzer, run_fuzz


def add_parser(sub) -> None:
    f = sub.add_parser("fuzz", help="fuzz the reader, planner, plan JSON, model folders and "
                                    "worker protocol with seeded mutants")
    _arguments(f)
    f.set_defaults(func=cmd_fuzz)


def _arguments(f: argparse.ArgumentParser) -> None:
    f.add_argument("-n", type=int, default=10000, help="number of mutants (default 10000)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--start", type=int, default=0, help="first mutant index (runs in chunks)")
    f.add_argument("--index", type=int, default=None,
                   help="rerun one mutant and print its reproducer")
    f.add_argument("--targets", default=",".join(WEIGHTS),
                   help=f"comma-separated subset of {','.join(WEIGHTS)}")
    f.add_argument("--time-limit", type=float, default=10.0,
                   help="seconds one mutant may take before it counts as a hang")
    f.add_argument("--max-memory-gib", type=float, default=4.0,
                   help="address-space limit of the process (a runaway allocation becomes a "
                        "MemoryError, counted as a crash, instead of swapping the machine)")
    f.add_argument("--out", default="out/fuzz", help="folder for crashing mutants")
    f.add_argument("--js", type=int, default=0, metavar="N",
                   help="also run N plan mutants through the page's validator (web/plan.js "
                        "parsePlan, needs node) and compare its verdicts with Plan.from_json")
    f.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_fuzz(args) -> int:
    limit = int(args.max_memory_gib * (1 << 30))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    targets = tuple(t for t in args.targets.split(",") if t)
    if args.index is not None:
        fuzzer = Fuzzer(targets)
        try:
            name, outcome, crash, seconds = fuzzer.one(args.seed, args.index, args.time_limit)
        finally:
            fuzzer.close()
        print(f"mutant {args.index} of seed {args.seed} [{name}]: {outcome} "
              f"in {seconds * 1e3:.0f} ms")
        if crash is not None:
            print(crash.reproducer())
        return 1 if crash is not None else 0

    def progress(report):
        if not args.quiet:
            print(f"  ... {report.mutants} mutants, {report.total('crash')} crashes, "
                  f"{report.total('hang')} hangs, {report.seconds:.0f} s", file=sys.stderr,
                  flush=True)

    report = run_fuzz(args.n, args.seed, start=args.start, targets=targets,
                      time_limit=args.time_limit, out_dir=args.out, progress=progress)
    shown = set()
    for crash in report.crashes:
        if crash.signature in shown:
            print(f"same class: seed {crash.seed} index {crash.index}: {crash.error[:120]}")
            continue
        shown.add(crash.signature)
        print(crash.reproducer())
    print(report.summary())
    bad = len(report.crashes)
    if args.js:
        bad += _js(args.js, args.seed)
    return 1 if bad else 0


def _js(n: int, seed: int) -> int:
    """The JS plan validator fuzz; the number of its findings."""
    from .plan_js import fuzz_plan_js

    r = fuzz_plan_js(n, seed)
    # Python also checks informational fields: only plans it takes and the page refuses count.
    looser = [d for d in r["disagree"] if d[1] == "valid"]
    print(f"plan.js parsePlan: {r['mutants']} mutants: {r['valid']} valid, {r['typed']} "
          f"PlanError, {len(r['crashes'])} crashes; {len(looser)} accepted by Plan.from_json "
          f"and refused by parsePlan")
    for i, steps, verdict in r["crashes"][:5]:
        print(f"  js mutant {seed}:js:{i}: {verdict}; mutations: {steps}")
    for i, _, _ in looser[:5]:
        print(f"  js mutant {seed}:js:{i}: Plan.from_json accepts it, parsePlan refuses it")
    return len(r["crashes"]) + len(looser)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m webpte.fuzz", description=__doc__)
    _arguments(p)
    return cmd_fuzz(p.parse_args(argv))
