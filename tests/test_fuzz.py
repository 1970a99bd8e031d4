"""The fuzzer's CI run (a few thousand seeded mutants of every target: zero crashes, zero
hangs) and one regression test per crash class it found."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import FIXTURES
from webpte.errors import PlanError, UnsupportedOpError
from webpte.fuzz import Fuzzer, run_fuzz
from webpte.fuzz.flatbuf import program_sites
from webpte.fuzz.plan_js import fuzz_plan_js
from webpte.host.files import ModelFolderError, resolve_model_folder
from webpte.plan import Plan
from webpte.planner import lower
from webpte.program import plan_method
from webpte.pte import read_program
from webpte.pte.builder import GraphBuilder
from webpte.web_glue import ChatSession, model_manifest

CI_MUTANTS = 3000
CI_SEED = 20261201


def test_ci_fuzz_run_has_no_crashes_and_no_hangs(tmp_path):
    report = run_fuzz(CI_MUTANTS, CI_SEED, out_dir=tmp_path, time_limit=20.0)
    shown = "\n\n".join(c.reproducer() for c in report.crashes[:5])
    assert report.total("crash") == 0 and report.total("hang") == 0, \
        report.summary() + "\n" + shown
    assert report.mutants == CI_MUTANTS
    assert set(report.counts) == {"pte", "plan", "folder", "glue"}
    pte = report.counts["pte"]
    # Both outcomes occur: the mutants are neither all rejected nor all harmless.
    assert pte["valid"] > 0.05 * CI_MUTANTS and pte["typed"] > 0.2 * CI_MUTANTS, report.summary()


@pytest.mark.skipif(shutil.which("node") is None, reason="no node for web/plan.js")
def test_the_page_plan_validator_refuses_with_plan_errors_only():
    r = fuzz_plan_js(500, CI_SEED)
    assert r["crashes"] == []
    # Plan.from_json is at least as strict as parsePlan: what it takes, the page takes.
    assert [d for d in r["disagree"] if d[1] == "valid"] == []
    assert r["valid"] > 0 and r["typed"] > 0


def test_a_mutant_is_rebuilt_from_its_seed_and_index():
    fuzzer = Fuzzer(("pte", "plan"))
    try:
        import random

        a = fuzzer.targets["pte"].mutant(random.Random("7:11"))
        b = fuzzer.targets["pte"].mutant(random.Random("7:11"))
        assert a == b
        assert fuzzer.one(7, 11, 20.0)[:2] == fuzzer.one(7, 11, 20.0)[:2]
    finally:
        fuzzer.close()


def test_sites_know_op_arguments_and_value_kinds():
    sites = program_sites((FIXTURES / "op_add.pte").read_bytes())
    args = [s for s in sites if s.kind == "id" and ".chain[0].args[" in s.path]
    values = read_program((FIXTURES / "op_add.pte").read_bytes()).method("forward").graph.values
    assert args and all(s.domain == len(values) for s in args)
    assert any(s.kind == "tag" and "VkGraph.values[" in s.path for s in sites)
    assert any(s.kind == "scalar" and s.path.endswith("<VkTensor>.datatype") for s in sites)
    assert any(s.kind == "length" and ".dims<length" in s.path for s in sites)


# --- regressions: one per crash class the fuzzer found ---------------------------------------

def _plan_dict() -> dict:
    prog = read_program((FIXTURES / "op_add.pte").read_bytes())
    return json.loads(plan_method(prog, "forward").to_json())


def test_plan_json_round_trips():
    text = json.dumps(_plan_dict(), separators=(",", ":"))
    assert Plan.from_json(text).to_json() == text


def _edit(path, value):
    def edit(d):
        node = d
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return d
    return edit


@pytest.mark.parametrize("text_or_edit", [
    "",                                       # not JSON (was JSONDecodeError)
    "[" * 100000 + "]" * 100000,              # nested too deep (was RecursionError)
    "[]", "null", "1e999",                    # not an object (was AttributeError)
    _edit(("version",), KeyError),            # (was ValueError)
    _edit(("method",), KeyError),             # (was KeyError)
    _edit(("buffers", 0), [1, 2]),            # (was TypeError: not a mapping)
    _edit(("buffers", 0, "x"), 1),            # unknown field (was TypeError)
    _edit(("buffers", 0, "role"), ["state"]),  # unhashable (was TypeError)
    _edit(("buffers", 0, "id"), True),
    _edit(("buffers", 0, "size"), 6),
    _edit(("buffers", 0, "init"), {"kind": "words", "words": [1] * 100000}),
    _edit(("kernels", 0), {"x": 1}),
    _edit(("dispatches", 0, "workgroups"), 1.5),   # (was TypeError: not iterable)
    _edit(("dispatches", 0, "bindings", 0), 99),
    _edit(("inputs", 0, "shape"), KeyError),
    _edit(("inputs", 0, "shape"), [1 << 40]),
    _edit(("inputs", 0, "storage"), {}),
    _edit(("limits",), []),
    _edit(("limits",), KeyError),             # required by the page's parsePlan too
    _edit(("state",), KeyError),
    _edit(("kernels", 0, "entry"), KeyError),
    _edit(("features",), [1]),
])
def test_malformed_plan_json_is_a_plan_error(text_or_edit):
    text = text_or_edit if isinstance(text_or_edit, str) else json.dumps(
        text_or_edit(_plan_dict()))
    with pytest.raises(PlanError, match="malformed plan"):
        Plan.from_json(text)


def test_layer_norm_with_an_empty_output_list_is_unsupported():
    g = GraphBuilder()   # was IndexError in kernels/reduce/layer_norm.py
    x = g.tensor(np.float32, (2, 3))
    g.op("aten.native_layer_norm.default", x, g.scalar((3,)), g.scalar(None), g.scalar(None),
         g.scalar(1e-5), g.value_list([]))
    graph, _ = g.build([x], [x])
    with pytest.raises(UnsupportedOpError, match="empty output list"):
        lower(graph)


def test_batch_norm_with_an_empty_output_list_is_unsupported():
    g = GraphBuilder()   # was IndexError in kernels/reduce/batch_norm.py (fuzz seed 0)
    x = g.tensor(np.float32, (2, 3, 4))
    stats = [g.constant(np.ones(3, np.float32)) for _ in range(4)]
    g.op("aten._native_batch_norm_legit_no_training.default", x, *stats, g.scalar(0.1),
         g.scalar(1e-5), g.value_list([]))
    graph, _ = g.build([x], [x])
    with pytest.raises(UnsupportedOpError, match="empty output list"):
        lower(graph)


def test_a_graph_without_buffers_plans_to_an_empty_plan():
    graph, _ = GraphBuilder().build([], [])   # was ValueError: max() of an empty sequence
    plan = lower(graph)
    assert plan.buffers == [] and plan.limits["max_buffer_size"] == 0


def _session(config_text: str | None = None) -> ChatSession:
    folder = FIXTURES / "tiny_vlm"
    manifest = json.loads(model_manifest("webpte_model.json",
                                         (folder / "webpte_model.json").read_text()))["ok"]
    tok = json.loads((folder / "tokenizer" / "tokenizer.json").read_text())
    vocab = {**tok["model"]["vocab"], **{t["content"]: t["id"] for t in tok["added_tokens"]}}
    config = config_text or (folder / "tokenizer" / "tokenizer_config.json").read_text()
    return ChatSession(json.dumps(manifest), config, lambda t: vocab.get(t, -1), 8, 64)


@pytest.mark.parametrize("options,ids", [
    ("not json", [1]), ("[1]", [1]), ('{"top_k": [1]}', [1]), ('{"max_new_tokens": "x"}', [1]),
    ('{"temperature": {}}', [1]), ('{"seed": 1e999}', [1]), ("{}", [[1]]), ("{}", "abc"),
    ("{}", [1e999]),
])
def test_generate_options_and_ids_of_any_shape_are_input_errors(options, ids):
    s = _session()
    assert "ok" in json.loads(s.setup())
    answer = json.loads(s.begin("hi", False, ids, options))
    assert answer["error"]["name"] == "InputError", answer


@pytest.mark.parametrize("config,error", [
    ("[]", "InputError"), ("[" * 5000 + "]" * 5000, "InputError"),
    ('{"chat_template": "{% if %}"}', "TemplateError"),
    ('{"chat_template": 5}', "TemplateError"),
    ('{"chat_template": [1, {"name": "default", "template": 7}]}', "TemplateError"),
])
def test_malformed_tokenizer_configs_are_typed_errors(config, error):
    answer = json.loads(_session(config).setup())
    assert answer["error"]["name"] == error, answer


def test_deeply_nested_meta_files_are_refused(tmp_path):
    deep = "[" * 100000 + "]" * 100000   # was RecursionError
    answer = json.loads(model_manifest("webpte_model.json", deep))
    assert answer["error"]["name"] == "InputError"
    (tmp_path / "webpte_model.json").write_text(deep)
    with pytest.raises(ModelFolderError, match="not valid JSON"):
        resolve_model_folder(tmp_path)


@pytest.mark.parametrize("factor", [float("inf"), float("nan"), 0.0, -2.0, 1e308])
def test_upsample_with_a_non_finite_scale_factor_is_unsupported(factor):
    g = GraphBuilder()   # was OverflowError in kernels/conv/resample.py
    x, o = g.tensor(np.float32, (1, 1, 4, 4)), g.tensor(np.float32, (1, 1, 8, 8))
    g.op("aten.upsample_nearest2d.vec", x, g.scalar(None), g.scalar((factor, 2.0)), o)
    graph, _ = g.build([x], [o])
    with pytest.raises(UnsupportedOpError, match="finite and positive"):
        lower(graph)


@pytest.mark.parametrize("eps", [1e300, float("inf"), float("nan")])
def test_a_float_argument_beyond_f32_in_a_kernel_is_a_plan_error(eps):
    g = GraphBuilder()   # was OverflowError in kernels/render.py (ValueError for inf/NaN)
    x, out = g.tensor(np.float32, (2, 3)), g.tensor(np.float32, (2, 3))
    mean, rstd = g.tensor(np.float32, (2, 1)), g.tensor(np.float32, (2, 1))
    g.op("aten.native_layer_norm.default", x, g.scalar((3,)), g.scalar(None), g.scalar(None),
         g.scalar(eps), g.value_list([out, mean, rstd]))
    graph, _ = g.build([x], [out])
    with pytest.raises(PlanError, match="no WGSL f32 literal"):
        lower(graph)


def test_a_float_parameter_word_beyond_f32_is_a_plan_error():
    from webpte.planner.lowering import _word

    with pytest.raises(PlanError, match="beyond float32"):   # was OverflowError
        _word(1e300)


def test_a_quantized_scale_beyond_f32_is_a_plan_error():
    from webpte.kernels.quantized.quantize import f32

    with pytest.raises(PlanError, match="beyond float32"):   # was OverflowError (q8ta units)
        f32(1e300)


@pytest.mark.parametrize("exponent", [float("nan"), float("inf"), -float("inf")])
def test_pow_with_a_non_finite_exponent_plans_or_is_typed(exponent):
    from webpte.errors import WebpteError

    g = GraphBuilder()   # was ValueError/OverflowError: int(exponent)
    x, out = g.tensor(np.float32, (5,)), g.tensor(np.float32, (5,))
    g.op("aten.pow.Tensor_Scalar", x, g.scalar(exponent), out)
    graph, _ = g.build([x], [out])
    try:
        lower(graph)
    except WebpteError:
        pass


def test_select_of_a_scalar_is_a_plan_error():
    g = GraphBuilder()   # was IndexError in kernels/layout/copy.py
    x = g.tensor(np.float32, ())
    out = g.tensor(np.float32, ())
    g.op("aten.select_copy.int", x, g.scalar(0), g.scalar(0), out)
    graph, _ = g.build([x], [out])
    with pytest.raises(PlanError, match="select needs an input of rank >= 1"):
        lower(graph)


def test_a_kernel_call_without_arguments_is_a_plan_error():
    import dataclasses

    prog = read_program((FIXTURES / "gemma4" / "gemma4_stock.pte").read_bytes())
    m = prog.method("forward")   # was ValueError (unpacking) in planner/method.py
    m.kernel_calls[0] = dataclasses.replace(m.kernel_calls[0], args=())
    with pytest.raises(PlanError, match="passes no arguments"):
        plan_method(prog, "forward")
