"""The planner: a method's graph -> passes -> one lowering loop -> a Plan (webpte.plan)."""

from .lowering import Lowering, fused_graph, lower

__all__ = ["Lowering", "fused_graph", "lower"]
