"""Checks the norm units share: optional weight/bias/statistics operands and their sizes."""

from __future__ import annotations


def optional(A, vid: int) -> int | None:
    """The value id, or None where the graph passes Null (an absent weight or bias)."""
    return None if A.is_null(vid) else vid


def wrong_size(A, sized) -> str | None:
    """Why the first present operand of `sized` ((name, value id or None, elements wanted),
    ...) has the wrong number of elements; None when all fit."""
    for name, vid, want in sized:
        if vid is not None and A.tensor(vid).numel != want:
            return f"{name} has {A.tensor(vid).numel} elements, expected {want}"
    return None


def f32_operands(L, vids, what: str) -> list[int]:
    """The present values of `vids`, each checked to be stored as float32."""
    present = [v for v in vids if v is not None]
    L.require_f32(what, present)
    return present
