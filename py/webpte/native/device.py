"""The wgpu-py adapter and device webpte runs on (one per process, shared)."""

from __future__ import annotations

import os

from ..errors import AdapterError

_DEVICE = None
_LIMITS: dict[str, int] = {}

# Limits a plan may ask for beyond WebGPU's defaults.
REQUESTABLE = ("max_buffer_size", "max_storage_buffer_binding_size",
               "max_storage_buffers_per_shader_stage")


def _adapter():
    import wgpu

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise AdapterError("no WebGPU adapter found; install a Vulkan driver "
                           "(e.g. `apt-get install mesa-vulkan-drivers` for lavapipe)")
    return adapter


def adapter_info() -> dict:
    a = _adapter()
    return {k: v for k, v in dict(a.info).items() if isinstance(v, (str, int))}


_CAPPED: dict[tuple, tuple[object, dict[str, int]]] = {}


def get_device(needed: dict[str, int] | None = None, cap: dict[str, int] | None = None):
    """A device whose limits cover `needed`; made once, with the adapter's maxima, or, with
    `cap` (plan.validate.resolve_limits), once per cap with limits no larger than it (WebGPU's
    defaults for `resolve_limits("default")`): what a program would get on a smaller
    adapter, here."""
    global _DEVICE, _LIMITS
    needed = needed or {}
    if cap is not None:
        return _capped(needed, cap)
    if _DEVICE is None:
        adapter = _adapter()
        have = adapter.limits
        _LIMITS = {k.replace("-", "_"): v for k, v in dict(have).items()}
        _DEVICE = _request(adapter, {k: _LIMITS[k] for k in REQUESTABLE})
    for name, value in needed.items():
        if name in _LIMITS and value > _LIMITS[name]:
            raise AdapterError(f"the plan needs {name} = {value}, the adapter allows "
                               f"{_LIMITS[name]}; use a GPU with larger limits")
    return _DEVICE


_FEATURES: frozenset[str] | None = None

# A kernel that only compiles where the packed int8 dot product exists.
_DOT4_PROBE = """
@group(0) @binding(0) var<storage, read_write> o: array<i32>;
@compute @workgroup_size(1) fn main() { o[0] = dot4I8Packed(0x01020304u, 0x01010101u); }
"""


def wgsl_features() -> frozenset[str]:
    """WGSL language features kernels may use on this device, and "subgroups" when the
    device has them.

    wgpu-py may not list language features (lavapipe lists none), so the ones webpte
    uses are also probed by compiling a one-line kernel. Also holds the planner hints of
    kernel variants for this adapter's type (plan.hints.adapter_hints).
    """
    global _FEATURES
    if _FEATURES is None:
        import wgpu

        listed = set(getattr(wgpu.gpu, "wgsl_language_features", ()) or ())
        found = set()
        if "packed_4x8_integer_dot_product" in listed:
            found.add("packed_4x8_integer_dot_product")
        else:
            dev = get_device()
            try:
                module = dev.create_shader_module(code=_DOT4_PROBE)
                dev.create_compute_pipeline(layout="auto",
                                            compute={"module": module, "entry_point": "main"})
                found.add("packed_4x8_integer_dot_product")
            except Exception:  # not supported: the portable kernels are used
                pass
        if "subgroup" in get_device().features:
            from ..kernels.quantized.linear_q8 import SUBGROUPS_FEATURE, SUBGROUPS_IMPLICIT

            found |= {SUBGROUPS_FEATURE, SUBGROUPS_IMPLICIT}
        from ..planner.hints import adapter_hints

        info = dict(_adapter().info)
        found |= adapter_hints(str(info.get("adapter_type", "")), str(info.get("device", "")))
        _FEATURES = frozenset(found)
    return _FEATURES


def check_features(needed) -> None:
    """A plan's device features (plan.features less WGSL language features) must be the
    device's: a plan made for another device is refused before any pipeline is made."""
    from ..kernels.quantized.linear_q8 import SUBGROUPS_FEATURE

    if SUBGROUPS_FEATURE in needed and "subgroup" not in get_device().features:
        raise AdapterError("the plan's kernels use subgroups, which this device lacks; "
                           "plan the program for this device")


def device_limits(cap: dict[str, int] | None = None) -> dict[str, int]:
    """The limits of the device `get_device(cap=cap)` gives."""
    if cap is not None:
        _capped({}, cap)
        return dict(_CAPPED[tuple(sorted(cap.items()))][1])
    get_device()
    return dict(_LIMITS)


def _request(adapter, limits: dict[str, int]):
    """A device of `adapter` with these requestable limits (snake case)."""
    # wgpu-py's name for WebGPU's "subgroups"; asked for whenever the adapter has it.
    return adapter.request_device_sync(
        required_limits={k.replace("_", "-"): v for k, v in limits.items()},
        required_features=[f for f in ("subgroup",) if f in adapter.features])


def _capped(needed: dict[str, int], cap: dict[str, int]):
    key = tuple(sorted(cap.items()))
    if key not in _CAPPED:
        get_device()
        dev = _request(_adapter(), {k: min(_LIMITS[k], cap.get(k, _LIMITS[k]))
                                    for k in REQUESTABLE})
        limits = {k.replace("-", "_"): v for k, v in dict(dev.limits).items()
                  if isinstance(v, int)}
        _CAPPED[key] = (dev, limits)
    dev, limits = _CAPPED[key]
    for name, value in needed.items():
        if name in limits and value > limits[name]:
            raise AdapterError(f"the plan needs {name} = {value}, the device (capped at "
                               f"{dict(cap)}) allows {limits[name]}")
    return dev
