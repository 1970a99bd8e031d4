"""Native execution of Plans on wgpu-py."""

from .device import adapter_info, device_limits, get_device, wgsl_features
from .executor import Executor

__all__ = ["Executor", "adapter_info", "device_limits", "get_device", "wgsl_features"]
