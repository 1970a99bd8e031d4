"""Dynamic shapes: a program exported with upper-bound dims (ExecuTorch's DYNAMIC_BOUND) runs
with smaller ones; webpte plans the graph specialized to the call's dims (planner/dynamic.py).
The fixture is the catalog's conv1d case exported for length 10 and called with length 7."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from webpte.conformance import run_catalog
from webpte.errors import InputError, PlanError, UnsupportedOpError
from webpte.planner.dynamic import broadcast_dims, specialize
from webpte.pte import read_program
from webpte.pte.builder import GraphBuilder

DYNAMIC = Path(__file__).parent / "fixtures" / "dynamic"
PTE = DYNAMIC / "conv1d__dynamic_length_10_to_7.pte"


def test_the_reader_marks_bounded_inputs():
    m = read_program(PTE.read_bytes()).method("forward")
    assert [io.dynamic for io in m.inputs] == [True]
    assert m.inputs[0].as_dict()["dynamic"] == "bound"
    static = read_program((DYNAMIC.parent / "op_catalog" / "add__regular_3d.pte").read_bytes())
    assert not any(io.dynamic for io in static.method("forward").inputs)


@pytest.mark.parametrize("backend", ["webgpu", "reference"])
def test_a_smaller_input_matches_the_catalog_golden(request, backend):
    if backend == "webgpu":
        request.getfixturevalue("gpu")
    (r,) = run_catalog(DYNAMIC, backend=backend)
    assert r.status == "pass", f"{r.status} {r.detail} {r.first_mismatches}"


def test_each_shape_is_planned_once_and_the_exported_one_still_runs(gpu, rng):
    import webpte

    prog = webpte.load(PTE)
    full = rng.standard_normal((1, 4, 10)).astype(np.float32)
    (y10,) = prog.run(full)
    (y7,) = prog.run(full[:, :, :7])
    (y7b,) = prog.run(full[:, :, :7])
    assert y10.shape == (1, 6, 8) and y7.shape == (1, 6, 5)
    assert list(prog._specialized) == [((1, 4, 7),)]
    np.testing.assert_array_equal(y7, y7b)
    # a valid convolution over the first 7 columns is the first 5 outputs of the full one
    np.testing.assert_allclose(y7, y10[:, :, :5], rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match=r"exported for dims up to \[1, 4, 10\]"):
        prog.run(rng.standard_normal((1, 4, 11)).astype(np.float32))
    with pytest.raises(InputError, match="exported for dims up to"):
        prog.run(rng.standard_normal((1, 4)).astype(np.float32))


def test_ops_without_a_shape_rule_say_so():
    b = GraphBuilder()
    x = b.tensor(np.float32, (4, 6))
    o = b.tensor(np.float32, (6, 4))
    b.op("aten.permute_copy.default", x, b.scalar((1, 0)), o)
    g, _ = b.build([x], [o])
    with pytest.raises(UnsupportedOpError, match="no shape rule for dynamic shapes"):
        specialize(g, g.input_ids, [(3, 6)])


def test_elementwise_ops_broadcast():
    assert broadcast_dims((3, 1, 5), (4, 1), ()) == (3, 4, 5)
    with pytest.raises(PlanError, match="do not broadcast"):
        broadcast_dims((3,), (4,))
    b = GraphBuilder()
    x = b.tensor(np.float32, (4, 6))
    y = b.tensor(np.float32, (4, 6))
    o = b.tensor(np.float32, (4, 6))
    b.op("aten.mul.Tensor", x, y, o)
    g, _ = b.build([x, y], [o])
    s = specialize(g, g.input_ids, [(2, 6), (2, 6)])
    assert s.values[g.output_ids[0]].dims == (2, 6) and g.values[g.output_ids[0]].dims == (4, 6)
