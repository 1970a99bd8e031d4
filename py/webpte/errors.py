"""Typed errors of webpte. Every message says what went wrong and what to do."""

from __future__ import annotations

__all__ = [
    "WebpteError",
    "PteFormatError",
    "UnsupportedOpError",
    "PlanError",
    "InputError",
    "AdapterError",
    "ExternalDataError",
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


class ExternalDataError(WebpteError):
    """A constant the program keeps outside the `.pte` (ExecuTorch external data) cannot be
    had: no data file holds its key, the file holding it is another program's (its bytes
    do not fit the tensor), or a data file is not a `.ptd`. `key` names the constant,
    `file` the data file (None: none given, or none held the key)."""

    def __init__(self, message: str, *, key: str | None = None, file: str | None = None):
        super().__init__(message)
        self.key = key
        self.file = file
