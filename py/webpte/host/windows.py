"""The window plan of the windowed decoder: 4-row windows ending at the newest position."""

from __future__ import annotations

from ..errors import InputError


class ContextFullError(InputError):
    """The conversation no longer fits in the program's context."""


def window_starts(n_positions: int, rows: int = 4, max_context: int = 512) -> list[int]:
    """Start positions of the windows that feed positions 0..n_positions-1.

    Windows of `rows` rows start at 0, rows, 2*rows, ...; the last one ends at the
    newest position (n_positions - 1) and may overlap the one before it: rewriting
    a row's K/V with the same token at the same position is harmless.
    """
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    if n_positions < rows:
        raise InputError(f"{n_positions} positions is fewer than one window of {rows} rows; "
                         f"the prompt must hold at least {rows} tokens")
    if n_positions > max_context:
        raise ContextFullError(f"{n_positions} positions exceed the context of {max_context}")
    starts = list(range(0, n_positions - rows + 1, rows))
    last = n_positions - rows
    if starts[-1] != last:
        starts.append(last)
    return starts


def extend_starts(done: int, n_positions: int, rows: int = 4, max_context: int = 512) -> list[int]:
    """Windows that feed positions done..n_positions-1 when 0..done-1 are already cached.

    The first window ends at the first new position or later; windows then step by
    `rows` and the last ends at the newest position.
    """
    if done <= 0:
        return window_starts(n_positions, rows, max_context)
    if n_positions > max_context:
        raise ContextFullError(f"{n_positions} positions exceed the context of {max_context}")
    if n_positions <= done:
        return []
    if n_positions < rows:
        raise InputError(f"{n_positions} positions is fewer than one window of {rows} rows")
    first = max(0, min(done, n_positions - rows))
    starts = list(range(first, n_positions - rows + 1, rows))
    if not starts or starts[-1] != n_positions - rows:
        starts.append(n_positions - rows)
    return starts
