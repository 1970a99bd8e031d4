"""Tier 0: reading and planning must work without numpy (the page runs them in Pyodide)."""

import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

_SCRIPT = r"""
import importlib.machinery
import sys

_find = importlib.machinery.PathFinder.find_spec
_HIDDEN = ("numpy", "wgpu")


def _hidden_find(name, path=None, target=None):
    # As if numpy and wgpu were not installed (flatbuffers probes with find_spec).
    if name.split(".")[0] in _HIDDEN:
        return None
    return _find(name, path, target)


importlib.machinery.PathFinder.find_spec = _hidden_find
for mod in _HIDDEN:
    sys.modules[mod] = None
import json
from pathlib import Path
from webpte.pte import read_program
from webpte.program import describe, plan_method
from webpte.kernels.registry import registry
registry()                            # imports every kernel module
done = 0
for p in sorted(Path(sys.argv[1]).glob("*.pte")):
    prog = read_program(p.read_bytes())
    plan = plan_method(prog, "forward")
    json.loads(plan.to_json())
    describe(prog, plans={"forward": plan})
    done += 1
print("planned", done)
"""


def test_plans_every_fixture_without_numpy_or_wgpu():
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(FIXTURES)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    n = int(r.stdout.split()[-1])
    assert n == len(list(FIXTURES.glob("*.pte"))) and n > 0
