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


def get_device(needed: dict[str, int] | None = None):
    """A device whose limits cover `needed`; made once, with the adapter's maxima."""
    global _DEVICE, _LIMITS
    needed = needed or {}
    if _DEVICE is None:
        adapter = _adapter()
        have = adapter.limits
        _LIMITS = {k.replace("-", "_"): v for k, v in dict(have).items()}
        want = {k.replace("_", "-"): _LIMITS[k] for k in REQUESTABLE}
        _DEVICE = adapter.request_device_sync(required_limits=want)
    for name, value in needed.items():
        if name in _LIMITS and value > _LIMITS[name]:
            raise AdapterError(f"the plan needs {name} = {value}, the adapter allows "
                               f"{_LIMITS[name]}; use a GPU with larger limits")
    return _DEVICE


def device_limits() -> dict[str, int]:
    get_device()
    return dict(_LIMITS)
