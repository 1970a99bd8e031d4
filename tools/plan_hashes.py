"""The sha256 of the plan JSON of every method of every committed fixture program (and the
built SmolLM2 decoder, when given), for each adapter type's planner hints.

A change to the planner that should not change behaviour keeps every hash; one that should
changes exactly the hashes it means to. A program webpte refuses records its error class, so
a refusal that turns into a plan (or the other way) shows up too.

    python tools/plan_hashes.py                       # print the table
    python tools/plan_hashes.py --write FILE          # write it (tests/fixtures/plan_hashes.json)
    python tools/plan_hashes.py --check FILE          # exit 1 naming every difference
    python tools/plan_hashes.py --model DIR ...       # also a model folder's decoder/vision
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from webpte.errors import WebpteError  # noqa: E402
from webpte.program import plan_method  # noqa: E402
from webpte.pte import open_source, read_program  # noqa: E402
from webpte.pte.data_file import read_data_file  # noqa: E402

HINTS = ("adapter_type:CPU", "adapter_type:GPU")
FIXTURES = ROOT / "tests" / "fixtures"


def programs(models: list[Path]) -> list[tuple[str, Path]]:
    """(name, path) of every fixture .pte (by its path under tests/fixtures) and every .pte of
    the given model folders (by folder name and file)."""
    out = [(str(p.relative_to(FIXTURES)), p) for p in sorted(FIXTURES.rglob("*.pte"))]
    for folder in models:
        out += [(f"{folder.name}/{p.name}", p) for p in sorted(folder.glob("*.pte"))]
    return out


def hash_program(path: Path) -> dict[str, str]:
    """{"method hints": sha256 of the plan JSON, or "refused: ErrorClass"} for each method
    that is not a constant, and {"file": sha256 of the program} (a re-exported program plans
    differently for a reason of its own)."""
    out = {"file": hashlib.sha256(path.read_bytes()).hexdigest()}
    try:
        # External data: the .ptd files beside the program named after it (as the fixtures are).
        ptd = sorted(path.parent.glob(f"{path.stem}*.ptd"))
        data = [read_data_file(open_source(d), str(d)) for d in ptd]
        prog = read_program(open_source(path), data)
    except WebpteError as e:
        return {**out, "*": f"refused: {type(e).__name__}"}
    for name in sorted(prog.methods):
        m = prog.method(name)
        if m.is_constant:
            continue
        # A method with dynamic shapes is planned at its upper bounds.
        shapes = [list(io.shape) for io in m.inputs] if any(io.dynamic for io in m.inputs) else None
        for hints in HINTS:
            try:
                text = plan_method(prog, name, features=[hints], fusion="all",
                                   input_shapes=shapes).to_json()
                out[f"{name} {hints}"] = hashlib.sha256(text.encode()).hexdigest()
            except WebpteError as e:
                out[f"{name} {hints}"] = f"refused: {type(e).__name__}"
    return out


def table(models: list[Path]) -> dict[str, dict[str, str]]:
    return {name: hash_program(path) for name, path in programs(models)}


def differences(want: dict, got: dict) -> list[str]:
    out = []
    for prog in sorted(set(want) | set(got)):
        a, b = want.get(prog), got.get(prog)
        if a is None or b is None:
            out.append(f"{prog}: {'new' if a is None else 'gone'}")
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{prog} [{key}]: {a.get(key)} -> {b.get(key)}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, action="append", default=[],
                    help="a model folder whose .pte files are hashed too (repeatable)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", type=Path, help="write the table to this JSON file")
    g.add_argument("--check", type=Path, help="compare with this JSON file; exit 1 on a difference")
    args = ap.parse_args(argv)
    got = table(args.model)
    if args.write:
        args.write.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        n = sum(len(v) - 1 for v in got.values())
        print(f"{n} plans of {len(got)} programs -> {args.write}")
        return 0
    if args.check:
        want = json.loads(args.check.read_text())
        # A model folder not given this time is not compared.
        want = {k: v for k, v in want.items() if k in got or (FIXTURES / k).exists()}
        diff = differences(want, got)
        print("\n".join(diff) or f"{sum(len(v) - 1 for v in got.values())} plans unchanged")
        return 1 if diff else 0
    print(json.dumps(got, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
