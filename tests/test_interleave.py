"""W regrouped for the few-row dual kernel (`q8_w:interleaved`, plan/interleave.py): the
layout, its validation in both plan readers, the page's copy of the regrouping (node), and
every shared form (plain, joined, paired with and without its tail, a last group past N)
bitwise the row-major plan's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES
from test_fusion_q8 import _pair_graph
from test_fusion_q8_join import _mlp_graph, _sibling_graph
from webpte.errors import PlanError
from webpte.plan.interleave import interleave, interleaved_bytes
from webpte.plan.model import Plan
from webpte.planner import lower

ROOT = Path(__file__).resolve().parents[1]
ROWS, ILV = ["q8_w:rows"], ["q8_w:interleaved"]


def test_layout_by_hand():
    # 2 segments of 3 rows of 32 bytes (2 blocks), groups of 2: the second group's second
    # row repeats row 2.
    k, n = 32, 3
    src = np.arange(2 * n * k, dtype=np.uint32).astype(np.uint8).tobytes()
    spec = {"row_bytes": k, "rows": n, "segments": 2, "group": 2}
    out = np.frombuffer(interleave(src, spec), np.uint8).reshape(-1, 16)
    assert interleaved_bytes(spec) == 2 * 2 * 2 * k == out.size
    s = np.frombuffer(src, np.uint8).reshape(2, n, 2, 16)   # segment, row, block, bytes
    want = [s[0, 0, 0], s[0, 1, 0], s[1, 0, 0], s[1, 1, 0],     # group 0, block 0
            s[0, 0, 1], s[0, 1, 1], s[1, 0, 1], s[1, 1, 1],     # group 0, block 1
            s[0, 2, 0], s[0, 2, 0], s[1, 2, 0], s[1, 2, 0],     # group 1 (row 2 twice)
            s[0, 2, 1], s[0, 2, 1], s[1, 2, 1], s[1, 2, 1]]
    assert (out == np.stack(want)).all()


@pytest.mark.parametrize("spec, why", [
    ({"row_bytes": 32, "rows": 3, "segments": 2}, "exactly"),
    ({"row_bytes": 24, "rows": 4, "segments": 2, "group": 2}, "multiple of 16"),
    ({"row_bytes": 32, "rows": 3, "segments": 2, "group": 0}, "positive integers"),
    ({"row_bytes": 32, "rows": 3, "segments": 2, "group": True}, "positive integers"),
    ({"row_bytes": 32, "rows": 5, "segments": 2, "group": 2}, "the parts hold 192"),
    ({"row_bytes": 32, "rows": 3, "segments": 2, "group": 2 ** 40}, "exceeds"),
])
def test_bad_specs_are_plan_errors(spec, why):
    src = bytes(2 * 3 * 32)
    with pytest.raises(PlanError, match=why):
        interleave(src, spec)
    g, _ = _pair_graph(m=4, k=32, n=8, bias=False)
    plan = json.loads(lower(g, features=ILV).to_json())
    (buf,) = [b for b in plan["buffers"] if (b.get("init") or {}).get("interleave")]
    buf["init"]["interleave"] = spec
    with pytest.raises(PlanError, match=why.split()[0]):
        Plan.from_json(json.dumps(plan))


def test_the_kernel_reads_the_regrouped_words():
    g, _ = _pair_graph(m=4, k=32, n=20, bias=False)
    ilv, rows = lower(g, features=ILV), lower(g, features=ROWS)
    (b,) = [b for b in ilv.buffers if b.init and b.init.get("interleave")]
    assert b.init["interleave"] == {"row_bytes": 32, "rows": 20, "segments": 1, "group": 8}
    assert b.size == 3 * 8 * 32                       # 20 rows in groups of 8: 24 rows
    assert "w[(grp * KW + k) * 8u + 7u]" in ilv.kernels[0].wgsl
    assert "grp" not in rows.kernels[0].wgsl
    assert not any(b.init and b.init.get("interleave") for b in rows.buffers)
    # K % 16 != 0: rows stay row-major whatever the hint
    g, _ = _pair_graph(m=4, k=36, n=20, bias=False)
    assert not any(b.init and b.init.get("interleave") for b in lower(g, features=ILV).buffers)


def _graphs():
    yield "plain, last group past N", _pair_graph(m=4, k=32, n=20, bias=False)
    yield "one row", _pair_graph(m=1, k=48, n=13, bias=False)
    yield "joined", _sibling_graph(m=4, k=32, ns=(24, 8, 8))
    yield "paired", _mlp_graph(4, 32, 12)
    yield "paired with its tail", _mlp_graph(4, 32, 16, tail="two_pass")


@pytest.mark.parametrize("name", [n for n, _ in _graphs()])
def test_every_form_is_the_row_major_plan_bitwise(gpu, name):
    from webpte.native import Executor

    g, blob = dict(_graphs())[name]
    plans = [lower(g, features=f) for f in (ROWS, ILV)]
    assert sum(1 for b in plans[1].buffers if b.init and b.init.get("interleave")) >= 1
    rng = np.random.default_rng(5)
    xs = [rng.integers(-128, 128, s.shape).astype(s.dtype) if s.dtype == "int8"
          else rng.standard_normal(s.shape).astype(s.dtype) for s in plans[0].inputs]
    outs = []
    for plan in plans:
        ex = Executor(plan, blob)
        ex.poison()
        outs.append([a.tobytes() for a in ex.run(xs)])
    assert outs[0] == outs[1]


def test_the_tiny_decoder_is_bitwise_with_every_weight_regrouped(gpu):
    from webpte.native import Executor
    from webpte.plan.io import sample_inputs
    from webpte.program import load, plan_method

    prog = load(FIXTURES / "decoder_q8_tiny.pte")
    outs, counts = [], []
    for f in (ROWS, ILV):
        plan = plan_method(prog.program, "forward", prog.features | set(f))
        counts.append(sum(1 for b in plan.buffers if b.init and b.init.get("interleave")))
        ex = Executor(plan, prog.data)
        outs.append([a.tobytes() for a in ex.run(sample_inputs(plan, np.random.default_rng(3)))])
    assert counts[0] == 0 and counts[1] >= 4 and outs[0] == outs[1]


@pytest.mark.skipif(shutil.which("node") is None, reason="no node for web/plan.js")
def test_the_page_regroups_as_python_does(tmp_path):
    rng = np.random.default_rng(9)
    cases = []
    for spec in ({"row_bytes": 32, "rows": 20, "segments": 1, "group": 8},
                 {"row_bytes": 48, "rows": 13, "segments": 2, "group": 4},
                 {"row_bytes": 16, "rows": 9, "segments": 3, "group": 8}):
        src = rng.integers(0, 256, spec["segments"] * spec["rows"] * spec["row_bytes"],
                           dtype=np.uint8).tobytes()
        cases.append({"spec": spec, "src": src.hex(), "want": interleave(src, spec).hex()})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    script = f"""
import {{ interleaveRows }} from {json.dumps(str(ROOT / 'web' / 'plan.js'))};
import {{ readFileSync }} from 'node:fs';
const cases = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'cases.json'))}, 'utf8'));
const hex = (u) => Buffer.from(u).toString('hex');
console.log(JSON.stringify(cases.map((c) =>
  hex(interleaveRows(new Uint8Array(Buffer.from(c.src, 'hex')), c.spec)) === c.want)));
"""
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [True, True, True]


def test_the_page_golden_plans_regrouped_w():
    """tests/browser/make_goldens.py's `dual_linear_q8_interleaved` (run in the page by the
    browser suite against the reference interpreter) really regroups its W."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from make_goldens import SYNTHETIC_VARIANTS

    make, features = SYNTHETIC_VARIANTS["dual_linear_q8_interleaved"]
    (g, _), _ = make(np.random.default_rng(0))
    plan = lower(g, features=features)
    (b,) = [b for b in plan.buffers if b.init and b.init.get("interleave")]
    assert b.init["interleave"]["rows"] == 37 and "grp * KW" in plan.kernels[0].wgsl
