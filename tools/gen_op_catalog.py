"""Generate ExecuTorch 1.5.1's WebGPU op-test catalog (dev extra: torch + executorch).

Runs ExecuTorch's own generator (`executorch.backends.webgpu.test.op_tests`) case by case, so
one case that fails to export is recorded in `failures.json` instead of ending the run, and the
manifest is rewritten after every op (an interrupted run keeps what it made; `--resume` skips
cases whose files are already there). The manifest format is the generator's own
(`generate_op_tests.py`); `webpte conformance DIR` reads it.

    python tools/gen_op_catalog.py --output build/op_catalog            # all 87 ops (~35 min)
    python tools/gen_op_catalog.py --output DIR --ops add,cat --resume
    python tools/gen_op_catalog.py --output tests/fixtures/op_catalog --subset smallest

`--subset smallest` keeps, per op, the one case with the fewest input and output elements
(the committed CI subset). `--merge SRC [SRC ...]` joins catalogs generated in parts (e.g.
two runs on disjoint `--ops`) into `--output`, without torch; the first source holding a
case wins.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path


def _numel(spec) -> int:
    from executorch.backends.webgpu.test.op_tests.test_suite import InputSpec
    shape = spec.shape if isinstance(spec, InputSpec) else spec
    return math.prod(shape)


def _selected_cases(ops, subset: str | None):
    from executorch.backends.webgpu.test.op_tests import cases  # noqa: F401  (registers)
    from executorch.backends.webgpu.test.op_tests.test_suite import op_test_registry
    names = ops or [op for op, s in op_test_registry.items() if s.verified]
    unknown = [n for n in names if n not in op_test_registry]
    if unknown:
        raise SystemExit(f"unknown op(s) {unknown}; the catalog has {sorted(op_test_registry)}")
    heavy = bool(os.environ.get("WEBGPU_TEST_HEAVY"))
    for op in names:
        suite = op_test_registry[op]
        picked = [c for c in suite.cases if heavy or not c.heavy]
        if subset == "smallest" and picked:
            picked = [min(picked, key=lambda c: sum(_numel(s) for s in c.inputs))]
        for case in picked:
            yield op, suite, case


def merge(out: Path, sources: list[Path]) -> int:
    """Copy every case of `sources` (files and manifest entries) into `out`."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    seen: dict[tuple, dict] = {}
    for src in sources:
        for e in json.loads((src / "manifest.json").read_text()):
            key = (e["op"], e["case"])
            if key in seen:
                continue
            files = [e["pte"], e["golden"]["path"]] + [x["path"] for x in e["inputs"]]
            if not all((src / f).is_file() for f in files):
                continue
            for f in files:
                if (src / f).resolve() != (out / f).resolve():
                    shutil.copyfile(src / f, out / f)
            seen[key] = e
    (out / "manifest.json").write_text(json.dumps(list(seen.values()), indent=2))
    print(f"merged {len(seen)} manifest entries from {len(sources)} catalog(s) -> {out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("--ops", default=None, help="comma-separated catalog op names")
    ap.add_argument("--subset", choices=["smallest"], default=None)
    ap.add_argument("--resume", action="store_true",
                    help="keep entries whose .pte is already in the manifest and on disk")
    ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="SRC",
                    help="join these generated catalogs into --output (no generation)")
    args = ap.parse_args()
    if args.merge:
        return merge(args.output, args.merge)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from executorch.backends.webgpu.test.op_tests.generate_op_tests import generate_case

    out: Path = args.output
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if args.resume and manifest_path.exists() else []
    done = {(e["op"], e["pte"]) for e in old if (out / e["pte"]).exists()}
    entries = [e for e in old if (e["op"], e["pte"]) in done]
    failures: list[dict] = []
    ops = args.ops.split(",") if args.ops else None
    t0 = time.time()
    n = 0
    for op, suite, case in _selected_cases(ops, args.subset):
        pte = f"{op}__{case.name or 'case'}.pte"
        if (op, pte) in done:
            continue
        t = time.time()
        try:
            entries.extend(generate_case(op, suite, case, str(out)))
        except Exception as e:  # one broken export must not end the catalog
            failures.append({"op": op, "case": case.name, "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-2000:]})
            print(f"FAILED {op}/{case.name}: {type(e).__name__}: {e}", file=sys.stderr)
        n += 1
        print(f"[{time.time() - t0:7.1f}s] {op}/{case.name} ({time.time() - t:.1f}s)",
              flush=True)
        manifest_path.write_text(json.dumps(entries, indent=2))
    (out / "failures.json").write_text(json.dumps(failures, indent=2))
    print(f"generated {n} case(s), {len(entries)} manifest entries, {len(failures)} failure(s) "
          f"in {time.time() - t0:.0f}s -> {manifest_path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
