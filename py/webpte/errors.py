"""Typed errors of webpte. Every message says what went wrong and what to do."""

from __future__ import annotations

__all__ = [
    "WebpteError",
    "PteFormatError",
    "UnsupportedOpError",
    "PlanError",
    "InputError",
    "AdapterError",
]


class WebpteError(Exception):
    """Base class of every error webpte raises on purpose."""


class PteFormatError(WebpteError):
    """The bytes are not a well-formed ExecuTorch program (or VK00 graph)."""

    def __init__(self, message: str, *, offset: int | None = None, field: str | None = None):
        where = []
        if field is not None:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"offset {offset}")
        suffix = f" ({', '.join(where)})" if where else ""
        super().__init__(f"malformed .pte: {message}{suffix}")
        self.offset = offset
        self.field = field


class UnsupportedOpError(WebpteError):
    """The graph uses ops (or op forms) that webpte has no kernel for."""

    def __init__(self, message: str, ops: list[str] | None = None):
        super().__init__(message)
        self.ops = list(ops or [])


class PlanError(WebpteError):
    """A graph could not be lowered to a plan (shapes, limits, structure)."""


class InputError(WebpteError):
    """Inputs given to a program do not match what the method takes."""


class AdapterError(WebpteError):
    """No usable WebGPU adapter, or its limits are too small for the plan."""
