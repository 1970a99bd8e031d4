"""The planner's passes (planner/passes.py): each fusing pass, added to the list in order,
fuses something in the tiny int8 decoder, and its plan gives the unfused plan's outputs
bit for bit; the interpreter runs each fused node as the nodes it fused, at the fused
node's place, and gives the unfused graph's outputs bit for bit (the moved nodes' inputs
were ready). Every fused kind the lowering loop knows occurs in the fixture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import fused_graph, lower
from webpte.planner.hints import resolve_hints
from webpte.planner.lowering import FUSED
from webpte.planner.passes import PASSES, FusedCall, passes_for
from webpte.program import method_parts
from webpte.pte import read_program

DECODER = Path(__file__).parent / "fixtures" / "decoder_q8_tiny.pte"
FEATURES = resolve_hints(["adapter_type:CPU"])   # the hints under which every kind occurs
FUSING = [i for i, p in enumerate(PASSES) if p.level > 0]


@pytest.fixture(scope="module")
def decoder():
    data = DECODER.read_bytes()
    return data, method_parts(read_program(data).method("forward"))


def _graph(decoder, passes):
    _, (graph, ins, outs, state) = decoder
    return fused_graph(graph, ins, outs, state, features=FEATURES, passes=passes)


def _calls(plan, n=2):
    rng = np.random.default_rng(11)
    out = []
    for _ in range(n):
        arrays = []
        for spec in plan.inputs:
            if spec.dtype.startswith("float"):
                arrays.append(rng.standard_normal(spec.shape).astype(spec.dtype))
            else:   # token ids / positions: small valid values
                arrays.append(rng.integers(0, 8, spec.shape).astype(spec.dtype))
        out.append(arrays)
    return out


def _interpret(graph, ins, arrays_per_call, data):
    state: dict = {}
    outs = []
    for arrays in arrays_per_call:
        env = run_reference(graph, dict(zip(ins, arrays, strict=True)), data, state)
        outs.append([np.asarray(env.get(v)) for v in graph.output_ids])
    return outs


def test_every_fused_kind_occurs(decoder):
    g = _graph(decoder, passes_for(True))
    kinds = {op.kind for op in g.chain if isinstance(op, FusedCall)}
    assert kinds == set(FUSED), f"kinds made {sorted(kinds)}, kinds lowered {sorted(FUSED)}"
    assert any(op.fused.tail is not None for op in g.chain
               if isinstance(op, FusedCall) and op.kind == "paired_linears")


def test_passes_for_is_a_prefix_of_levels():
    assert [p.name for p in passes_for(False)] == ["split_weights"]
    assert [p.name for p in passes_for("elementwise")] == ["split_weights", "share_duplicates",
                                                           "elementwise"]
    assert passes_for(True) == list(PASSES)


@pytest.mark.parametrize("upto", FUSING, ids=[PASSES[i].name for i in FUSING])
def test_each_fusing_pass_keeps_outputs_bitwise(gpu, decoder, upto):
    data, (graph, ins, outs, state) = decoder
    before = [p for p in PASSES[:upto] if p.level > 0 or p.name == "split_weights"]
    after = [*before, PASSES[upto]]
    g0, g1 = _graph(decoder, before), _graph(decoder, after)
    assert len(g1.chain) < len(g0.chain) or any(
        a is not b for a, b in zip(g0.chain, g1.chain, strict=True)), \
        f"{PASSES[upto].name} fused nothing"
    # every node is computed, and only a clone read through by a fused node twice
    ran = [n for n, _ in g1.unfused()]
    assert set(ran) == set(range(len(g1.nodes)))
    assert all(g1.node(n).name == "aten.clone.default" for n in set(ran) if ran.count(n) > 1)
    plans = [lower(graph, input_ids=ins, output_ids=outs, state_ids=state, features=FEATURES,
                   passes=p) for p in ([PASSES[0]], after)]
    calls = _calls(plans[0])
    runs = []
    for plan in plans:
        ex = Executor(plan, data)
        runs.append([ex.run(arrays) for arrays in calls])
    for c, (a, b) in enumerate(zip(*runs, strict=True)):
        for x, y in zip(a, b, strict=True):
            assert x.tobytes() == y.tobytes(), f"call {c}: {PASSES[upto].name} changed an output"
    flat = _interpret(_graph(decoder, [PASSES[0]]), ins, calls, data)
    fused = _interpret(g1, ins, calls, data)
    for c, (a, b) in enumerate(zip(flat, fused, strict=True)):
        for x, y in zip(a, b, strict=True):
            assert x.tobytes() == y.tobytes(), f"call {c}: fused nodes ran out of place"
