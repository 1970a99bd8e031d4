"""Layer norm rows held in registers (up to MAX_WORKGROUP * MAX_RESIDENT elements) against the
looping kernel: the same arithmetic in the same order, so both forms give identical floats;
longer rows loop."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_layer_norm import _graph
from webpte.kernels.reduce import layer_norm
from webpte.native import Executor
from webpte.planner import lower


def _run(graph, blob, x, resident: int, monkeypatch):
    monkeypatch.setattr(layer_norm, "MAX_RESIDENT", resident)
    plan = lower(graph)
    used = any("keeps its" in k.wgsl for k in plan.kernels)
    ex = Executor(plan, blob)
    ex.poison()
    return ex.run([x]), used


@pytest.mark.parametrize("shape,norm,weight,bias", [
    ((2, 64, 768), (768,), True, True),     # the vision tower's rows: 64 x 12, no ragged edge
    ((3, 5, 37), (37,), True, False),       # ragged: fewer elements than invocations + 5
    ((4, 7, 9), (7, 9), False, False),      # two normalized dims, no affine
])
def test_resident_matches_loop_exactly(gpu, rng, monkeypatch, shape, norm, weight, bias):
    graph, blob, _, _ = _graph(rng, shape, norm, weight=weight, bias=bias)
    x = (2 * rng.standard_normal(shape) + 3).astype(np.float32)
    held, used_held = _run(graph, blob, x, layer_norm.MAX_RESIDENT, monkeypatch)
    looped, used_loop = _run(graph, blob, x, 0, monkeypatch)
    assert used_held and not used_loop
    for h, lp, what in zip(held, looped, ("out", "mean", "rstd"), strict=True):
        assert_close(h, lp, exact=True, what=f"registers vs loop: {what}")


def test_long_row_loops(gpu, rng):
    n = layer_norm.MAX_WORKGROUP * layer_norm.MAX_RESIDENT + 3
    graph, blob, _, _ = _graph(rng, (2, n), (n,))
    assert not any("keeps its" in k.wgsl for k in lower(graph).kernels)
    x = rng.standard_normal((2, n)).astype(np.float32)
    native, ref = run_graph_both(graph, blob, [x])
    assert_close(native[0], ref[0], rel=1e-5, what="long layer norm")
