"""The plan validator (plan/validate.py): each rule fails on a plan that breaks it; every
committed fixture's plan passes; the planner turns an in-place op into a copy, not a clash."""

from __future__ import annotations

import copy

import pytest

from webpte.errors import PlanError
from webpte.plan.model import BufferSpec, DispatchSpec, IOSpec, KernelSpec, Plan
from webpte.plan.validate import binding_access, validate_plan, workgroup_size

WGSL = """@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({wg}) fn main() {{}}"""


def _plan(wg: str = "64") -> Plan:
    return Plan(
        method="forward",
        buffers=[BufferSpec(0, 16, "input", "x"), BufferSpec(1, 16, "activation", "h"),
                 BufferSpec(2, 16, "output", "y")],
        kernels=[KernelSpec(0, "copy", WGSL.format(wg=wg))],
        dispatches=[DispatchSpec(0, [0, 1], (1, 1, 1), "aten.relu.default", 0),
                    DispatchSpec(0, [1, 2], (1, 1, 1), "aten.neg.default", 1)],
        inputs=[IOSpec(0, "float32", (4,), "f32")], outputs=[IOSpec(2, "float32", (4,), "f32")])


def test_a_valid_plan_passes():
    validate_plan(_plan(), {"max_storage_buffer_binding_size": 16,
                            "max_compute_workgroup_size_x": 64})


def test_bindings_and_workgroup_size_are_read_from_the_wgsl():
    assert binding_access("@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
                          "@group(0) @binding(0) var<uniform> u: P;\n"
                          "@group(0) @binding(2) var<storage> z: array<u32>;") == \
        ["uniform", "read_write", "read"]
    assert workgroup_size("@workgroup_size(8, 4)") == (8, 4, 1)
    assert workgroup_size("@workgroup_size(WG)") is None
    with pytest.raises(PlanError, match="not 0..1"):
        binding_access("@group(0) @binding(1) var<storage, read> a: array<f32>;\n"
                       "@group(0) @binding(2) var<storage, read> b: array<f32>;")


def _broken(edit) -> Plan:
    p = copy.deepcopy(_plan())
    edit(p)
    return p


@pytest.mark.parametrize("edit, limits, pattern", [
    (lambda p: setattr(p.dispatches[1], "bindings", [1, 1]), {},
     r"dispatch 1 \(aten.neg.default, node 1\) binds h both writable and read-only"),
    (lambda p: setattr(p.dispatches[0], "bindings", [0, 1, 2]), {},
     "binds 3 buffers, kernel copy declares 2"),
    (lambda p: setattr(p.dispatches[0], "kernel", 3), {}, "names kernel 3 of 1"),
    (lambda p: setattr(p.dispatches[0], "bindings", [0, 9]), {}, "outside the plan"),
    (lambda p: p.dispatches.reverse(), {}, "reads buffer h before anything writes it"),
    (lambda p: p.dispatches.pop(), {}, "output buffer y is never written"),
    (lambda p: None, {"max_storage_buffer_binding_size": 8}, "max_storage_buffer_binding_size"),
    (lambda p: None, {"max_buffer_size": 8}, "max_buffer_size"),
    (lambda p: None, {"max_storage_buffers_per_shader_stage": 1},
     "binds 2 buffers, the device allows 1"),
    (lambda p: setattr(p.dispatches[0], "workgroups", (70000, 1, 1)),
     {"max_compute_workgroups_per_dimension": 65535}, r"each count must be 1..65535"),
    (lambda p: setattr(p.kernels[0], "wgsl", WGSL.format(wg="512")),
     {"max_compute_workgroup_size_x": 256}, "max_compute_workgroup_size_x"),
    (lambda p: setattr(p.kernels[0], "wgsl", WGSL.format(wg="32, 16")),
     {"max_compute_invocations_per_workgroup": 256}, "max_compute_invocations_per_workgroup"),
])
def test_each_rule_fails_on_a_plan_that_breaks_it(edit, limits, pattern):
    with pytest.raises(PlanError, match=pattern):
        validate_plan(_broken(edit), limits)


def test_the_planner_writes_a_copy_for_an_op_that_reads_and_writes_one_buffer():
    """aliased_inplace_state: the delegate's add writes the state it reads (one dispatch
    binding it twice crashed at submit); the plan copies in, runs, copies out."""
    import webpte
    from conftest import FIXTURES

    prog = webpte.load(FIXTURES / "semantics" / "aliased_inplace_state.pte",
                       backend="reference")
    plan = prog.plan
    validate_plan(plan)
    copies = [d for d in plan.dispatches if d.op.endswith("(in-place copy)")]
    assert len(copies) == 2 and copies[0].bindings[::-1] == copies[1].bindings
