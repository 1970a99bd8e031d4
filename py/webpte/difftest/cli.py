"""`webpte difftest`: differential testing with generated programs."""

from __future__ import annotations

import sys

from .export import WAYS, have_exporter


def add_parser(sub) -> None:
    d = sub.add_parser("difftest", help="run seeded, generated PyTorch programs exported by "
                                        "ExecuTorch against eager PyTorch (needs torch and "
                                        "executorch)")
    d.add_argument("-n", type=int, default=100, help="number of generated modules (default 100)")
    d.add_argument("--seed", type=int, default=0, help="program seeds are seed+start .. "
                                                       "seed+start+n-1")
    d.add_argument("--start", type=int, default=0, help="first program index (runs in chunks)")
    d.add_argument("--out", default="out/difftest",
                   help="folder for reproducers of mismatches and crashes (<seed>-<way>/)")
    d.add_argument("--ways", default=",".join(WAYS),
                   help=f"comma-separated subset of {','.join(WAYS)}")
    d.add_argument("--verbose", "-v", action="store_true", help="one line per program")
    d.set_defaults(func=cmd_difftest)


def cmd_difftest(args) -> int:
    why = have_exporter()
    if why is not None:
        print(f"webpte difftest: {why}", file=sys.stderr)
        return 2
    ways = tuple(w for w in args.ways.split(",") if w)
    unknown = sorted(set(ways) - set(WAYS))
    if unknown:
        print(f"webpte difftest: unknown ways {unknown}; known: {', '.join(WAYS)}",
              file=sys.stderr)
        return 2
    from .runner import run_difftest

    def progress(report, cases):
        for c in cases:
            if args.verbose or c.status in ("mismatch", "crash", "invalid"):
                where = f" -> {c.reproducer}" if c.reproducer else ""
                print(f"  program {c.seed} [{c.way}]: {c.status} {c.reason}{where}",
                      file=sys.stderr, flush=True)
        if report.modules % 25 == 0:
            print(f"  ... {report.modules} modules, {report.programs} programs, "
                  f"{report.count('mismatch')} mismatch, {report.count('crash')} crash, "
                  f"{report.seconds:.0f} s", file=sys.stderr, flush=True)

    report = run_difftest(args.n, args.seed, args.start, ways, args.out, progress)
    print(report.summary())
    bad = report.count("mismatch") + report.count("crash") + report.count("invalid")
    return 1 if bad else 0
