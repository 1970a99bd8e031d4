"""The planner: a method's graph -> passes -> one lowering loop -> a Plan (webpte.plan)."""

from .lowering import Lowering, lower

__all__ = ["Lowering", "lower"]
