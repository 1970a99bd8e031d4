"""Differential testing (webpte.difftest): generated programs against eager PyTorch.

CI runs a seeded handful of modules, each exported three ways, natively and on the numpy
interpreter: no mismatch and no crash. Known failures are marked per seed and way
(strict xfail), so a fix shows up as XPASS. Every failure difftest found is kept as a
program in tests/fixtures/difftest/ (a reproducer's module.py, its docstring naming the bug)
and run the ways it failed. The comparison itself must fail on a wrong result.
`make difftest` runs 2,000 modules.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from webpte.difftest import compare_outputs, generate
from webpte.difftest.runner import classify, run_backend
from webpte.errors import PlanError, PteFormatError, UnsupportedOpError

SEEDS = range(9000, 9012)
WAYS = ("webgpu", "portable", "alias")
BAKED = ("ExecuTorch 1.5.1 bakes a buffer read in one delegate and written in another into the "
         "first as a constant: the exported program reads zeros in the second call")
# (seed or fixture, way): the bug, until it is fixed.
KNOWN: dict[tuple[int | str, str], str] = {
    **{("buffer_baked_into_delegate", w): BAKED for w in ("webgpu", "alias")},
}
REGRESSIONS = Path(__file__).parent / "fixtures" / "difftest"


def _fixture_ways() -> list[tuple[str, str]]:
    """(fixture name, way) for the ways each kept program lists in its WAYS."""
    import ast

    out = []
    for path in sorted(REGRESSIONS.glob("*.py")):
        tree = ast.parse(path.read_text())
        ways = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and getattr(n.targets[0], "id", None) == "WAYS")
        out += [(path.stem, w) for w in ways]
    return out


def _params(keys):
    return [pytest.param(*k, marks=pytest.mark.xfail(strict=True, reason=KNOWN[k]))
            if k in KNOWN else k for k in keys]


def _exporter():
    from webpte.difftest.export import have_exporter

    why = have_exporter()
    if why is not None:
        pytest.skip(why)


def _check(case) -> None:
    detail = "\n".join(f"{b}: {o.status}: {o.detail[:600]}" for b, o in case.outcomes.items())
    assert case.status in ("pass", "refused", "skipped"), f"{case.reproducer}\n{detail}"


@pytest.mark.parametrize("seed,way", _params((s, w) for s in SEEDS for w in WAYS))
def test_generated_program_matches_eager(gpu, tmp_path, seed, way):
    _exporter()
    from webpte.difftest.runner import run_module

    (case,) = run_module(seed, (way,), tmp_path)
    _check(case)


@pytest.mark.parametrize("name,way", _params(_fixture_ways()))
def test_kept_failure_matches_eager(gpu, tmp_path, name, way):
    _exporter()
    from webpte.difftest.runner import run_source

    (case,) = run_source((REGRESSIONS / f"{name}.py").read_text(), 0, (way,), tmp_path)
    assert case.status != "refused", case.reason
    _check(case)


def test_generation_is_seeded_and_varied():
    a, b = generate(7), generate(7)
    assert a.source == b.source and a.ops == b.ops
    sources = {generate(s).source for s in range(40)}
    assert len(sources) == 40
    ops = {op for s in range(200) for op in generate(s).ops}
    assert {"binary", "linear", "conv", "norm", "mutate", "split", "arg_reduce",
            "index", "cat", "where"} <= ops
    assert any(generate(s).buffers for s in range(40))


def test_comparison_fails_on_wrong_results():
    f = np.linspace(-3, 3, 35, dtype=np.float32).reshape(5, 7)
    i = np.arange(6, dtype=np.int64)
    m = np.array([True, False, True])
    assert compare_outputs([f, i, m], [f, i, m]) == []
    near = f + np.float32(5e-5)   # within atol 1e-4
    assert compare_outputs([near], [f]) == []
    off = f.copy()
    off[2, 3] += 1e-3
    (d,) = compare_outputs([off], [f])
    assert d.what == "values" and "1 of 35" in d.detail and "(2, 3)" in d.detail
    (d,) = compare_outputs([f, i + (i == 4)], [f, i], call=1)
    assert (d.call, d.output, d.what) == (1, 1, "values")
    (d,) = compare_outputs([~m], [m])
    assert d.what == "values"
    assert compare_outputs([f.reshape(7, 5)], [f])[0].what == "shape"
    assert compare_outputs([i.astype(np.int32)], [i])[0].what == "dtype"
    assert compare_outputs([f], [f, i])[0].what == "count"
    nan = f.copy()
    nan[0, 0] = np.nan
    assert compare_outputs([nan], [nan]) == []
    assert compare_outputs([f], [nan])[0].what == "values"
    assert compare_outputs([np.float32(2.0)], [np.float32(2.0)]) == []
    assert compare_outputs([np.float32(2.5)], [np.float32(2.0)])[0].what == "values"


def test_classification():
    assert classify(UnsupportedOpError("no kernel for 1 op(s): aten.topk.default",
                                       ["aten.topk.default"])).status == "refused"
    assert classify(PlanError("aten.cat.default (node 3): takes 2 arguments")).status == \
        "refused"
    assert classify(PlanError("the plan needs more memory")).status == "crash"
    assert classify(PteFormatError("method input value 1 is not an argument")).status == \
        "crash"
    assert classify(KeyError(3)).status == "crash"


# A program in the generator's form: softmax (float32) and argmax (int64) outputs.
SOURCE = """
import torch
from torch import nn

SEED = 5
CALLS = 1


class Program(nn.Module):
    def forward(self, x0, x1):
        v0 = torch.softmax(x0 * x1, -1)
        return (v0, torch.argmax(x0, 1))


def build():
    return Program().eval()


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 7919 + call)
    return (torch.randn((3, 7), generator=g), torch.randn((7,), generator=g))
"""


@pytest.mark.parametrize("output,delta", [(0, 1e-3), (1, 1)])
def test_a_perturbed_output_is_a_mismatch(output, delta):
    """The whole path (eager, export, run on the interpreter) reports a wrong expected value."""
    _exporter()
    from webpte.difftest.export import eager, export, load_module

    ns = load_module(SOURCE, "<difftest test program>")
    inputs, expected = eager(ns)
    data = export(ns, "portable")
    assert run_backend(data, "reference", inputs, expected).status == "pass"
    wrong = [[o.copy() for o in call] for call in expected]
    wrong[0][output].reshape(-1)[1] += delta
    out = run_backend(data, "reference", inputs, wrong)
    assert out.status == "mismatch" and f"call 0 output {output}: values: 1 of" in out.detail


def test_cli_summary_line(gpu, tmp_path, capsys):
    _exporter()
    from webpte.cli import main

    assert main(["difftest", "-n", "1", "--seed", "9008", "--ways", "portable",
                 "--out", str(tmp_path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.fullmatch(r"difftest: 1 programs, (\d) pass, (\d) refused, 0 mismatch, 0 crash", last)
    assert m and int(m[1]) + int(m[2]) == 1, last
    assert main(["difftest", "-n", "1", "--ways", "nope"]) == 2


def test_summary_counts_and_classes():
    from webpte.difftest.runner import Case, Outcome, Report

    ok = {"webgpu": Outcome("pass"), "reference": Outcome("pass")}
    refused = Outcome("refused", reason="UnsupportedOpError no kernel for aten.topk.default")
    wrong = Outcome("mismatch", "call 1 output 0: values: ...", reason="values in call 1")
    report = Report(modules=3, cases=[
        Case(1, "webgpu", "pass", dict(ok)),
        Case(1, "portable", "refused", {"webgpu": refused, "reference": refused},
             reason=refused.reason),
        Case(2, "webgpu", "mismatch", {"webgpu": wrong, "reference": Outcome("pass")},
             reason=wrong.reason, reproducer="out/difftest/2-webgpu"),
        Case(2, "portable", "skipped", reason="SpecViolationError: ..."),
        Case(3, "webgpu", "crash", {"webgpu": Outcome("crash", reason="KeyError N")},
             reason="KeyError N"),
    ])
    lines = report.summary().splitlines()
    assert lines[-1] == "difftest: 4 programs, 1 pass, 1 refused, 1 mismatch, 1 crash"
    text = "\n".join(lines)
    assert "1  UnsupportedOpError no kernel for aten.topk.default" in text
    assert "mismatch: values in call 1 [webgpu/webgpu] e.g. out/difftest/2-webgpu" in text
    assert "skipped (export) by reason:" in text
