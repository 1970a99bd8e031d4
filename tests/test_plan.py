"""Tier 0 planner: missing ops, buffer reuse by lifetime, Plan JSON, params buffers."""

from __future__ import annotations

import numpy as np
import pytest

from webpte.errors import UnsupportedOpError
from webpte.plan import Plan
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def test_missing_ops_are_listed_up_front():
    b = GraphBuilder()
    x, y, z = (b.tensor(np.float32, (3,)) for _ in range(3))
    b.op("aten.made_up.default", x, y)
    b.op("aten.add.Tensor", x, y, b.scalar(1), z)
    b.op("aten.other_missing.default", z, y)
    g, _ = b.build([x], [y])
    with pytest.raises(UnsupportedOpError) as e:
        lower(g)
    assert e.value.ops == ["aten.made_up.default", "aten.other_missing.default"]
    assert "aten.made_up.default, aten.other_missing.default" in str(e.value)


def _chain(n_ops: int, size: int):
    """x -> relu -> relu -> ... (n_ops), each intermediate used once."""
    b = GraphBuilder()
    x = b.tensor(np.float32, (size,))
    cur = x
    for _ in range(n_ops):
        nxt = b.tensor(np.float32, (size,))
        b.op("aten.relu.default", cur, nxt)
        cur = nxt
    return b.build([x], [cur])


def test_activations_share_buffers_by_lifetime():
    g, _ = _chain(6, 1000)
    plan = lower(g, fuse=False)   # fused, the chain is one dispatch with no intermediates
    act = [b for b in plan.buffers if b.role == "activation"]
    # Five intermediates, at most two alive at once: two pooled buffers serve them all.
    assert len(act) == 2 and all(b.size == 4000 for b in act)
    for d in plan.dispatches:   # an op never reads and writes the same buffer
        assert len(set(d.bindings)) == len(d.bindings)


def test_plan_json_round_trip_and_params_buffers():
    b = GraphBuilder()
    # Two inputs: quantizes of one value would be sibling chains, one multi-output dispatch.
    x1, x2 = b.tensor(np.float32, (2, 5)), b.tensor(np.float32, (2, 5))
    q1, q2 = b.tensor(np.int8, (2, 5)), b.tensor(np.int8, (2, 5))
    for x, q, scale, zp in ((x1, q1, 0.05, 3), (x2, q2, 0.25, -1)):
        b.op("quantized_decomposed.quantize_per_tensor.default", x, b.scalar(scale),
             b.scalar(zp), b.scalar(-128), b.scalar(127), b.scalar(None), q)
    g, _ = b.build([x1, x2], [q1, q2])
    plan = lower(g)
    # Two quantizes that differ only in scale/zero point share one kernel.
    assert len(plan.kernels) == 1 and len(plan.dispatches) == 2
    words = [b.init["words"] for b in plan.buffers if b.init and b.init["kind"] == "words"]
    assert sorted(w[1] for w in words) == [3, 0xFFFFFFFF]
    again = Plan.from_json(plan.to_json())
    assert again == plan
