"""Generate ExecuTorch 1.5.1's WebGPU op-test catalog (dev extra: torch + executorch).

Runs ExecuTorch's own generator (`executorch.backends.webgpu.test.op_tests`) case by case, so
one case that fails to export is recorded in `failures.json` instead of ending the run, and the
manifest is rewritten after every op (an interrupted run keeps what it made; `--resume` skips
cases whose files are already there). The manifest format is the generator's own
(`generate_op_tests.py`); `webpte conformance DIR` reads it.

    python tools/gen_op_catalog.py --output build/op_catalog            # all 87 ops (~35 min)
    python tools/gen_op_catalog.py --output DIR --ops add,cat --resume
    python tools/gen_op_catalog.py --output tests/fixtures/op_catalog --subset smallest

    python tools/gen_op_catalog.py --output tests/fixtures/op_catalog --subset variants \
        --from build/op_catalog

`--subset smallest` keeps, per op, the one case with the fewest input elements. `--subset
variants` (the committed CI subset) copies from a generated catalog (`--from`), per op, the
smallest case, the largest whose files fit `--max-case-bytes`, and every case that plans a
kernel variant none of those chosen before it plans (cases in order of size), where a case's
variants are the kernels webpte plans for it under each of VARIANT_TARGETS' features, told
apart by their WGSL with the numbers taken out (template branches, not sizes). A variant only
a case over the size limit plans is reported; STAND_INS names a smaller case made with the
same generator that plans it instead. `--cases` picks cases by name (op/case, e.g.
et_vk_sdpa/selfattn_siglip). `--merge SRC [SRC ...]` joins catalogs generated in parts (e.g.
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


# Smaller cases made with the same generator for a case too large to commit whose kernel
# variants no committed case plans: (op, case) -> (name, construct arguments replaced, input
# shapes; the case's own data generators).
STAND_INS = {
    # 576 keys of D 64 (the serial kernel split under llvmpipe's loop budget, a GPU's key
    # chunks) over 2 heads of 16 rows: 0.6 MB for selfattn_siglip's 7 MB
    ("et_vk_sdpa", "selfattn_siglip"): (
        "selfattn_siglip_keys", {}, ((1, 2, 16, 64), (1, 2, 576, 64), (1, 2, 576, 64))),
    # the large products' 16x128 tile (M <= 16, N > 64) past the small-product size, with M
    # under the tile (bart_proj) and filling it (rank3); addmm's B contiguous (lavapipe's
    # untiled kernel, K > 256: 16x8 outputs per invocation)
    ("linear_fp32", "bart_proj"): (
        "bart_proj_k288", {"in_features": 288, "out_features": 128}, ((1, 8, 288),)),
    ("linear_fp32", "rank3"): (
        "rank3_k256", {"in_features": 256, "out_features": 128}, ((1, 16, 256),)),
    ("addmm", "bart"): ("bart_k320", {"n": 128}, ((16, 320), (320, 128))),
}


def _registry():
    from executorch.backends.webgpu.test.op_tests import cases  # noqa: F401  (registers)
    from executorch.backends.webgpu.test.op_tests.test_suite import op_test_registry
    return op_test_registry


def _selected_cases(ops, subset: str | None, names: set[str] | None = None):
    registry = _registry()
    ops = ops or sorted({n.split("/", 1)[0] for n in names or ()}) or None
    ops = ops or [op for op, s in registry.items() if s.verified]
    unknown = [n for n in ops if n not in registry]
    if unknown:
        raise SystemExit(f"unknown op(s) {unknown}; the catalog has {sorted(registry)}")
    heavy = bool(os.environ.get("WEBGPU_TEST_HEAVY"))
    for op in ops:
        suite = registry[op]
        picked = [c for c in suite.cases if heavy or not c.heavy]
        if names:
            picked = [c for c in picked if f"{op}/{c.name}" in names]
        if subset == "smallest" and picked:
            picked = [min(picked, key=lambda c: sum(_numel(s) for s in c.inputs))]
        for case in picked:
            yield op, suite, case


def _stand_in(op: str, case: str, out: Path) -> list[dict]:
    """Generate STAND_INS[(op, case)] into `out`: its manifest entries."""
    from dataclasses import replace

    from executorch.backends.webgpu.test.op_tests.generate_op_tests import generate_case
    from executorch.backends.webgpu.test.op_tests.test_suite import InputSpec

    name, construct, shapes = STAND_INS[(op, case)]
    suite = _registry()[op]
    orig = next(c for c in suite.cases if c.name == case)
    inputs = tuple(InputSpec(shape=sh, gen=x.gen if isinstance(x, InputSpec) else "randn")
                   for x, sh in zip(orig.inputs, shapes, strict=True))
    made = replace(orig, name=name, inputs=inputs, construct={**orig.construct, **construct})
    return generate_case(op, suite, made, str(out))


def variants_subset(src: Path, out: Path, ops, names, max_bytes: int) -> int:
    """Copy `src`'s variants subset (catalog_variants.choose per op) into `out`, with
    stand-ins for too-large cases whose variants no chosen case plans; print why each."""
    import catalog_variants as cv

    targets = cv.target_features()
    cases = [c for c in cv.read_cases(src)
             if (not ops or c.op in ops) and (not names or f"{c.op}/{c.name}" in names)]
    for c in cases:
        c.variants = cv.case_variants(src, c, targets)
    entries, missing, total = [], 0, 0
    for op in dict.fromkeys(c.op for c in cases):
        choice = cv.choose([c for c in cases if c.op == op], max_bytes)
        entries += cv.copy_cases(src, out, [c for c, _ in choice.chosen])
        for c, why in choice.chosen:
            total += c.nbytes
            print(f"{op}/{c.name}: {why} ({c.numel} input elements, {c.nbytes} bytes)")
        covered = set().union(*(c.variants for c, _ in choice.chosen))
        for c, new in choice.too_large:
            if not new - covered:
                continue
            if (op, c.name) not in STAND_INS:
                missing += 1
                print(f"NOT COVERED {op}/{c.name} ({c.nbytes} bytes > {max_bytes}): "
                      f"{sorted(new - covered)}", file=sys.stderr)
                continue
            made = _stand_in(op, c.name, out)
            stand = cv.read_cases(out, made)[0]
            stand.variants = cv.case_variants(out, stand, targets)
            left = new - covered - stand.variants
            print(f"{op}/{stand.name}: stand-in for {c.name} ({c.nbytes} bytes; "
                  f"{stand.nbytes} bytes){' NOT COVERED ' + str(sorted(left)) if left else ''}")
            missing += bool(left)
            covered |= stand.variants
            total += stand.nbytes
            entries += made
    (out / "manifest.json").write_text(json.dumps(entries, indent=2))
    print(f"{len({e['pte'] for e in entries})} case(s), {len(entries)} manifest entries, "
          f"{total / 2**20:.1f} MiB -> {out}; {missing} too-large case(s) not covered")
    return 1 if missing else 0



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
    ap.add_argument("--cases", default=None,
                    help="comma-separated op/case names (e.g. et_vk_sdpa/selfattn_siglip)")
    ap.add_argument("--subset", choices=["smallest", "variants"], default=None)
    ap.add_argument("--from", dest="source", type=Path, default=None, metavar="DIR",
                    help="--subset variants: the generated catalog to choose from")
    ap.add_argument("--max-case-bytes", type=int, default=None,
                    help="--subset variants: the most bytes of one case's files "
                         "(catalog_variants.MAX_CASE_BYTES)")
    ap.add_argument("--resume", action="store_true",
                    help="keep entries whose .pte is already in the manifest and on disk")
    ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="SRC",
                    help="join these generated catalogs into --output (no generation)")
    args = ap.parse_args()
    if args.merge:
        return merge(args.output, args.merge)
    ops = args.ops.split(",") if args.ops else None
    names = set(args.cases.split(",")) if args.cases else None
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.subset == "variants":
        import catalog_variants

        if args.source is None or not (args.source / "manifest.json").is_file():
            raise SystemExit("--subset variants chooses from a generated catalog: --from DIR "
                             "(make catalog)")
        return variants_subset(args.source, args.output, ops, names,
                               args.max_case_bytes or catalog_variants.MAX_CASE_BYTES)
    from executorch.backends.webgpu.test.op_tests.generate_op_tests import generate_case

    out: Path = args.output
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if args.resume and manifest_path.exists() else []
    done = {(e["op"], e["pte"]) for e in old if (out / e["pte"]).exists()}
    entries = [e for e in old if (e["op"], e["pte"]) in done]
    failures: list[dict] = []
    t0 = time.time()
    n = 0
    for op, suite, case in _selected_cases(ops, args.subset, names):
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
