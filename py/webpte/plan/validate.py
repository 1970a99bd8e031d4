"""One validator for every Plan, run before any device sees it (natively when an Executor is
made, in the planner's own output, and mirrored by the page's plan reader, web/plan.js).

Rules, each a `PlanError` naming the dispatch and its op:

* every dispatch names a kernel and binds exactly the bindings its WGSL declares;
* WebGPU's usage scope: no buffer bound both writable (`read_write`) and read-only or uniform
  in one dispatch;
* per dispatch, storage and uniform bindings within the stage's limits; every bound buffer
  within the binding size limit, every buffer within the buffer size limit;
* workgroup counts within `max_compute_workgroups_per_dimension`, the kernels'
  `@workgroup_size` within the workgroup limits;
* every buffer a dispatch reads (read-only or uniform) holds something: an input, state, an
  initial content, or what an earlier dispatch wrote; likewise every output.

Limits are WebGPU's names in snake case (`max_storage_buffer_binding_size`); missing ones are
not checked (webpte/limits.py: the specification's defaults, and caps).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import PlanError

if TYPE_CHECKING:   # annotations only: the model imports this module
    from .model import DispatchSpec, Plan

_BINDING = re.compile(r"@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var<\s*(storage|uniform)"
                      r"\s*(?:,\s*(read_write|read)\s*)?>")
_WORKGROUP = re.compile(r"@workgroup_size\(([^)]*)\)")


def binding_access(wgsl: str) -> list[str]:
    """Each binding's access in binding order: "read", "read_write" or "uniform"."""
    found = {}
    for m in _BINDING.finditer(wgsl):
        kind, access = m.group(2), m.group(3) or "read"
        found[int(m.group(1))] = "uniform" if kind == "uniform" else access
    if sorted(found) != list(range(len(found))):
        raise PlanError(f"kernel declares bindings {sorted(found)}, not 0..{len(found) - 1}")
    return [found[i] for i in range(len(found))]


def workgroup_size(wgsl: str) -> tuple[int, int, int] | None:
    """The kernel's `@workgroup_size` as three ints (None when not literal)."""
    m = _WORKGROUP.search(wgsl)
    if m is None:
        return None
    try:
        dims = [int(x.strip().rstrip("u"), 0) for x in m.group(1).split(",") if x.strip()]
    except ValueError:
        return None
    return tuple(dims + [1] * (3 - len(dims)))[:3]


def conflicts(access: list[str], bindings: list[int]) -> set[int]:
    """Buffers a dispatch binds writable and also read-only or uniform."""
    written = {b for b, a in zip(bindings, access, strict=True) if a == "read_write"}
    read = {b for b, a in zip(bindings, access, strict=True) if a != "read_write"}
    return written & read


def validate_plan(plan: Plan, limits: dict[str, int] | None = None) -> None:
    """Raise `PlanError` on the first rule (module docstring) the plan breaks."""
    limits = limits or {}
    access = [binding_access(k.wgsl) for k in plan.kernels]
    sizes = [workgroup_size(k.wgsl) for k in plan.kernels]
    n = len(plan.buffers)
    cap = limits.get("max_buffer_size")
    for b in plan.buffers:
        if cap is not None and b.size > cap:
            raise PlanError(f"buffer {b.label or b.id} holds {b.size} bytes, the device allows "
                            f"buffers of {cap} (max_buffer_size)")
    filled = {b.id for b in plan.buffers if b.init is not None or b.role in ("state", "input")}
    filled |= {io.buffer for io in plan.inputs}
    dispatches = list(plan.dispatches) + [d for r in plan.readouts for d in r.dispatches]
    for i, d in enumerate(dispatches):
        where = f"dispatch {i} ({d.op or 'unnamed'}, node {d.node})"
        _check_dispatch(d, where, plan, access, sizes, limits, n)
        acc = access[d.kernel]
        for b, a in zip(d.bindings, acc, strict=True):
            if a != "read_write" and b not in filled:
                raise PlanError(f"{where} reads buffer {plan.buffers[b].label or b} before "
                                "anything writes it")
        filled |= {b for b, a in zip(d.bindings, acc, strict=True) if a == "read_write"}
    for io in plan.outputs:
        if io.buffer not in filled and all(io.shape):   # an empty output holds nothing
            raise PlanError(f"output buffer {plan.buffers[io.buffer].label or io.buffer} is "
                            "never written")


def _check_dispatch(d: DispatchSpec, where: str, plan: Plan, access, sizes, limits, n) -> None:
    if not 0 <= d.kernel < len(plan.kernels):
        raise PlanError(f"{where} names kernel {d.kernel} of {len(plan.kernels)}")
    acc = access[d.kernel]
    if len(d.bindings) != len(acc):
        raise PlanError(f"{where} binds {len(d.bindings)} buffers, kernel "
                        f"{plan.kernels[d.kernel].name} declares {len(acc)}")
    if any(not 0 <= b < n for b in d.bindings):
        raise PlanError(f"{where} binds a buffer outside the plan's {n}")
    clash = conflicts(acc, d.bindings)
    if clash:
        names = ", ".join(plan.buffers[b].label or str(b) for b in sorted(clash))
        raise PlanError(f"{where} binds {names} both writable and read-only (WebGPU's usage "
                        "scope rule)")
    for key, kind in (("max_storage_buffers_per_shader_stage", ("read", "read_write")),
                      ("max_uniform_buffers_per_shader_stage", ("uniform",))):
        count = sum(a in kind for a in acc)
        if key in limits and count > limits[key]:
            raise PlanError(f"{where} binds {count} buffers, the device allows {limits[key]} "
                            f"({key})")
    for b, a in zip(d.bindings, acc, strict=True):
        key = ("max_uniform_buffer_binding_size" if a == "uniform"
               else "max_storage_buffer_binding_size")
        if key in limits and plan.buffers[b].size > limits[key]:
            raise PlanError(f"{where} binds {plan.buffers[b].label or b} of "
                            f"{plan.buffers[b].size} bytes, the device allows {limits[key]} "
                            f"({key})")
    most = limits.get("max_compute_workgroups_per_dimension")
    if any(w < 1 or (most is not None and w > most) for w in d.workgroups):
        raise PlanError(f"{where} dispatches {tuple(d.workgroups)} workgroups, each count must "
                        f"be 1..{most}")
    size = sizes[d.kernel]
    if size is not None:
        for axis, s in zip("xyz", size, strict=True):
            key = f"max_compute_workgroup_size_{axis}"
            if key in limits and s > limits[key]:
                raise PlanError(f"{where}: kernel workgroup size {size} exceeds {key} "
                                f"{limits[key]}")
        key = "max_compute_invocations_per_workgroup"
        if key in limits and size[0] * size[1] * size[2] > limits[key]:
            raise PlanError(f"{where}: kernel workgroup size {size} exceeds {key} {limits[key]}")
