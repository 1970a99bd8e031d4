"""Lowering of graphs to serialisable Plans."""

from .lowering import Lowering, lower
from .model import BufferSpec, DispatchSpec, IOSpec, KernelSpec, Plan

__all__ = ["BufferSpec", "DispatchSpec", "IOSpec", "KernelSpec", "Lowering", "Plan", "lower"]
