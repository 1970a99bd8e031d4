"""What a plan needs from a WebGPU device, and whether a device has it, known before any weight
byte is uploaded (or, in the page, downloaded): a plan holds shapes, kernels and dispatches,
not weight values, so the program's flatbuffer regions are enough to make it.

`plan_needs(plan)` lists every limit the plan's buffers, kernels and dispatches touch, under
WebGPU's limit names (snake_case, as wgpu-py spells them) plus `device_memory` (bytes of every
buffer and output staging buffer the executor makes); `check_fits` raises AdapterLimitsError
naming the first limit the device does not cover. Imports neither numpy nor wgpu (it runs in
Pyodide); `device_limits` asks the native device.
"""

from __future__ import annotations

import re

from .errors import AdapterError, PlanError
from .plan import Plan

__all__ = ["AdapterLimitsError", "check_fits", "check_plan", "device_limits", "plan_needs",
           "workgroup_storage_bytes"]

# Needs that are minima (an offset alignment must be at most the device's value) are absent:
# plans bind whole buffers at offset 0.
DEVICE_MEMORY = "device_memory"


class AdapterLimitsError(AdapterError):
    """The device's limits (or a memory budget) are smaller than the plan needs; `limit`,
    `needed` and `allowed` say which (the page's AdapterLimitsError carries the same)."""

    def __init__(self, limit: str, needed: int, allowed: int):
        what = ("device memory" if limit == DEVICE_MEMORY else limit)
        super().__init__(f"the plan needs {what} = {needed}, this device allows {allowed}; use "
                         f"a GPU with larger WebGPU limits, or a smaller program")
        self.limit, self.needed, self.allowed = limit, needed, allowed


# WGSL host-shareable scalar and vector types: (size, alignment) in bytes.
_SCALARS = {"f32": (4, 4), "i32": (4, 4), "u32": (4, 4), "f16": (2, 2), "bool": (4, 4)}
_VAR = re.compile(r"var\s*<\s*workgroup\s*>\s*\w+\s*:\s*(.+?)\s*;")
_WORKGROUP_SIZE = re.compile(r"@workgroup_size\(\s*([^)]*?)\s*\)")


def _layout(ty: str, kernel: str) -> tuple[int, int]:
    """(size, alignment) of a WGSL type as workgroup memory lays it out."""
    ty = ty.replace(" ", "")
    if ty in _SCALARS:
        return _SCALARS[ty]
    m = re.fullmatch(r"atomic<(i32|u32)>", ty)
    if m:
        return 4, 4
    m = re.fullmatch(r"vec([234])<(\w+)>", ty) or re.fullmatch(r"vec([234])([fiuh])", ty)
    if m:
        n = int(m.group(1))
        elem = {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}.get(m.group(2), m.group(2))
        size, _ = _layout(elem, kernel)
        align = size * (4 if n == 3 else n)
        return size * n, align
    m = re.fullmatch(r"array<(.+),(\d+)u?>", ty)
    if m:
        size, align = _layout(m.group(1), kernel)
        stride = -(-size // align) * align
        return stride * int(m.group(2)), align
    raise PlanError(f"kernel {kernel}: workgroup variable of type {ty!r}, whose size the "
                    f"preflight does not know; report it")


def workgroup_storage_bytes(wgsl: str, kernel: str = "kernel") -> int:
    """Bytes of `var<workgroup>` memory a kernel declares (each variable aligned as WGSL lays
    it out; declared variables all count, as if every one were used)."""
    total = 0
    for ty in _VAR.findall(wgsl):
        size, align = _layout(ty, kernel)
        total = -(-total // align) * align + size
    return -(-total // 16) * 16


def _workgroup_size(wgsl: str, kernel: str) -> tuple[int, int, int]:
    m = _WORKGROUP_SIZE.search(wgsl)
    if not m:
        raise PlanError(f"kernel {kernel} declares no @workgroup_size")
    dims = [int(d.strip().rstrip("u")) for d in m.group(1).split(",") if d.strip()]
    return tuple((dims + [1, 1])[:3])


def plan_needs(plan: Plan) -> dict[str, int]:
    """Every device limit the plan reaches, by WebGPU name, plus `device_memory`."""
    buffers = plan.buffers
    staging = sum(buffers[o.buffer].size for o in plan.outputs)
    kernels = [(workgroup_storage_bytes(k.wgsl, k.name), _workgroup_size(k.wgsl, k.name))
               for k in plan.kernels]
    used = {d.kernel for d in plan.dispatches}
    sizes = [kernels[k][1] for k in used]
    bindings = max((len(d.bindings) for d in plan.dispatches), default=0)
    biggest = max((b.size for b in buffers), default=0)
    return {
        "max_buffer_size": biggest,
        "max_storage_buffer_binding_size": max(
            (buffers[b].size for d in plan.dispatches for b in d.bindings), default=0),
        "max_storage_buffers_per_shader_stage": bindings,
        "max_bindings_per_bind_group": bindings,
        "max_bind_groups": 1 if plan.dispatches else 0,
        "max_compute_workgroup_storage_size": max((kernels[k][0] for k in used), default=0),
        "max_compute_invocations_per_workgroup": max((x * y * z for x, y, z in sizes),
                                                     default=0),
        "max_compute_workgroup_size_x": max((s[0] for s in sizes), default=0),
        "max_compute_workgroup_size_y": max((s[1] for s in sizes), default=0),
        "max_compute_workgroup_size_z": max((s[2] for s in sizes), default=0),
        "max_compute_workgroups_per_dimension": max(
            (w for d in plan.dispatches for w in d.workgroups), default=0),
        DEVICE_MEMORY: sum(b.size for b in buffers) + staging,
    }


def check_fits(needs: dict[str, int], limits: dict[str, int]) -> None:
    """Raise AdapterLimitsError for the first need above its limit; a limit `limits` does not
    name is not checked (`device_memory`: only where a budget is given)."""
    for name, needed in needs.items():
        allowed = limits.get(name)
        if allowed is not None and needed > allowed:
            raise AdapterLimitsError(name, int(needed), int(allowed))


def device_limits() -> dict[str, int]:
    """The limits plans get on the native device (webpte.native.get_device): the adapter's
    maxima for the limits webpte requests, WebGPU's defaults for the others."""
    from .native import get_device

    return {k.replace("-", "_"): int(v) for k, v in dict(get_device().limits).items()
            if isinstance(v, int)}


def check_plan(plan: Plan, limits: dict[str, int] | None = None) -> dict[str, int]:
    """Check `plan` against `limits` (default: the native device's) before anything is
    uploaded; returns its needs."""
    needs = plan_needs(plan)
    check_fits(needs, device_limits() if limits is None else limits)
    return needs
