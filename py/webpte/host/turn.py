"""One conversation turn as pure decisions (no numpy, no GPU): the native Session and
the page's worker both drive their decoders with these, so the contract exists once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InputError
from .windows import ContextFullError, extend_starts


@dataclass(frozen=True)
class Contract:
    """Facts of a windowed decoder's host contract."""

    rows: int                 # rows per window (4)
    max_context: int          # positions in the KV cache (512)
    sink_id: int              # token that must sit at position 0 (<|im_start|>)
    sink_token: str
    stop_ids: frozenset[int]


DEFAULT_STOP_TOKENS = ("<end_of_utterance>", "<|im_end|>")


def make_contract(token_id: Callable[[str], int | None], rows: int, max_context: int,
                  sink_token: str, stop_tokens=()) -> Contract:
    """The contract of a decoder taking `rows`-row windows over `max_context` positions, with
    token ids looked up by `token_id` (None when the tokenizer lacks the token)."""
    sink_id = token_id(sink_token)
    if sink_id is None:
        raise InputError(f"the tokenizer has no token {sink_token!r}")
    stops = list(stop_tokens) or list(DEFAULT_STOP_TOKENS)
    stop_ids = frozenset(i for t in stops if (i := token_id(t)) is not None)
    if not stop_ids:
        raise InputError(f"none of the stop tokens {stops} is in the tokenizer")
    return Contract(int(rows), int(max_context), sink_id, sink_token, stop_ids)


def check_sink(ids: list[int], c: Contract) -> None:
    """Position 0 is overwritten with the sink's K/V: refuse prompts that do not start with it."""
    if not ids or ids[0] != c.sink_id:
        raise InputError(f"the prompt must start with the attention-sink token "
                         f"{c.sink_token!r} (id {c.sink_id}) at position 0; it starts with "
                         f"{ids[:1]}")


def reusable_prefix(cached: list[int], ids: list[int]) -> int:
    """Positions whose cached K/V can be kept: the common prefix of the two token lists."""
    n = 0
    for a, b in zip(cached, ids):
        if a != b:
            break
        n += 1
    return n


def prefill_windows(cached: list[int], ids: list[int], c: Contract) -> tuple[int, list[int]]:
    """(reused positions, window starts) that bring the cache from `cached` to `ids`."""
    check_sink(ids, c)
    if len(ids) >= c.max_context:
        raise ContextFullError(f"the prompt needs {len(ids)} positions; the context holds "
                               f"{c.max_context}. Start a new conversation (reset)")
    # The newest row is always fed again: its logits give the next token, even when the
    # whole prompt is cached (a regenerated answer to the same conversation).
    reuse = min(reusable_prefix(cached, ids), len(ids) - 1)
    return reuse, extend_starts(reuse, len(ids), c.rows, c.max_context)


def decode_window_start(n_cached: int, c: Contract) -> int:
    """Start of the window that feeds the newest token (at position n_cached - 1)."""
    return n_cached - c.rows


def stop_reason(token: int | None, n_generated: int, n_cached: int, max_new_tokens: int,
                c: Contract) -> str | None:
    """Why generation stops before feeding `token` (None: go on).

    Checked before sampling (token None): the token limit and a full context; after
    sampling: a stop token.
    """
    if token is None:
        if n_generated >= max_new_tokens:
            return "max_new_tokens"
        if n_cached >= c.max_context:
            return "context_full"
        return None
    return "stop_token" if token in c.stop_ids else None
