"""The Plan: the serialisable program the executors run (buffers, kernels, dispatches).

A data model at the bottom of the package: it imports nothing of the planner
(webpte.planner) or the kernels, so executors and tools read plans without them.
"""

from .model import BufferSpec, DispatchSpec, IOSpec, KernelSpec, Plan, ReadoutSpec

__all__ = ["BufferSpec", "DispatchSpec", "IOSpec", "KernelSpec", "Plan", "ReadoutSpec"]
