"""Softmax rows held in registers (short rows) against the looping kernel (long rows): the
same arithmetic in the same order, so both forms give identical floats."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.kernels.reduce import softmax
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _graph(shape, dim, op):
    g = GraphBuilder()
    x, o = g.tensor(np.float32, shape), g.tensor(np.float32, shape)
    g.op(op, x, g.scalar(dim), g.scalar(False), o)
    return g.build([x], [o])


def _run(graph, blob, x, resident: int, monkeypatch):
    monkeypatch.setattr(softmax, "MAX_RESIDENT", resident)
    plan = lower(graph)
    used = any("keeps its" in k.wgsl for k in plan.kernels)
    ex = Executor(plan, blob)
    ex.poison()
    return ex.run([x])[0], used


@pytest.mark.parametrize("op", ["aten._softmax.default", "aten._log_softmax.default"])
@pytest.mark.parametrize("shape,dim", [
    ((2, 1024), -1),      # attention rows: 32 invocations x 32 registers, no ragged edge
    ((2, 1029, 3), 1),    # strided, ragged: the last register of most invocations is empty
    ((4, 31), -1),        # fewer elements than invocations
])
def test_resident_matches_loop_exactly(gpu, rng, monkeypatch, op, shape, dim):
    graph, blob = _graph(shape, dim, op)
    x = (4 * rng.standard_normal(shape)).astype(np.float32)
    held, used_held = _run(graph, blob, x, softmax.MAX_RESIDENT, monkeypatch)
    looped, used_loop = _run(graph, blob, x, 0, monkeypatch)
    assert used_held and not used_loop
    assert_close(held, looped, exact=True, what="registers vs loop")


def test_long_row_loops(gpu, rng):
    # Past MAX_WORKGROUP * MAX_RESIDENT elements a row is walked by the loop form.
    shape = (2, softmax.MAX_WORKGROUP * softmax.MAX_RESIDENT + 7)
    graph, blob = _graph(shape, -1, "aten._softmax.default")
    assert not any("keeps its" in k.wgsl for k in lower(graph).kernels)
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert_close(out, ref, rel=1e-5, what="long softmax")
