"""The page's plan validator (web/plan.js `parsePlan`, through node) over the plan JSON
target's mutants: every mutant must be accepted or refused with a PlanError, and the
verdicts are compared with `Plan.from_json`'s (the two validators keep the same rules)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

from ..errors import WebpteError
from ..plan import Plan
from .targets import FIXTURES, PlanJsonTarget, committed_programs

SCRIPT = Path(__file__).with_name("plan_js.mjs")
WEB_PLAN = FIXTURES.parent.parent / "web" / "plan.js"


def fuzz_plan_js(n: int, seed: int = 0, time_limit: float = 600.0) -> dict:
    """`{"mutants", "valid", "typed", "crashes": [(index, steps, verdict)], "disagree":
    [(index, python, js)]}` for mutants `seed:js:0 .. n-1`."""
    if shutil.which("node") is None or not WEB_PLAN.is_file():
        raise FileNotFoundError("the JS plan fuzz needs node and the repository's web/plan.js")
    target = PlanJsonTarget(committed_programs())
    mutants = []
    for i in range(n):
        text, _, steps = target.mutant(random.Random(f"{seed}:js:{i}"))
        try:
            Plan.from_json(text)
            verdict = "valid"
        except WebpteError:
            verdict = "typed"
        mutants.append((text, steps, verdict))
    # JS parses with JSON.parse: texts it cannot parse are PlanErrors either way.
    lines = "".join(json.dumps(t) + "\n" for t, _, _ in mutants)
    out = subprocess.run(["node", str(SCRIPT), str(WEB_PLAN)], input=lines, text=True,
                         capture_output=True, timeout=time_limit, check=True).stdout.splitlines()
    report = {"mutants": n, "valid": 0, "typed": 0, "crashes": [], "disagree": []}
    for i, ((_, steps, py), js) in enumerate(zip(mutants, out, strict=True)):
        if js.startswith("crash"):
            report["crashes"].append((i, steps, js))
            continue
        report[js] += 1
        if js != py:
            report["disagree"].append((i, py, js))
    return report
