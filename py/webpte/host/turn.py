"""One conversation turn as pure decisions (no numpy, no GPU): the native Session and
the page's worker both drive their decoders with these, so the contract exists once."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InputError
from .windows import ContextFullError, extend_starts


@dataclass(frozen=True)
class Ring:
    """Sliding-window layers whose K/V live in a ring cache (Gemma 4): position p is written
    to slot p % rows, and a query at p sees positions p - window + 1 .. p. The mask trusts
    each slot to hold the newest position written there, so a slot the previous turn wrote
    past the reused prefix no longer holds the prefix's row."""

    window: int
    rows: int


@dataclass(frozen=True)
class Contract:
    """Facts of a windowed decoder's host contract."""

    rows: int                 # rows per window (4)
    max_context: int          # positions in the KV cache (512)
    sink_id: int              # token that must sit at position 0 (<|im_start|>)
    sink_token: str
    stop_ids: frozenset[int]
    ring: Ring | None = None  # None: every layer's cache is indexed by position


class RingSlots:
    """Which position each ring slot holds, as the host fed windows (-1: not known, e.g.
    after a turn that stopped while its windows ran)."""

    def __init__(self, rows: int):
        self.held = [-1] * rows

    def write(self, start: int, n: int) -> None:
        """Rows start .. start + n - 1 were fed."""
        for p in range(start, start + n):
            self.held[p % len(self.held)] = p

    def holds(self, positions) -> bool:
        return all(self.held[p % len(self.held)] == p for p in positions)


DEFAULT_STOP_TOKENS = ("<end_of_utterance>", "<|im_end|>")


def ring_of_meta(meta: dict, where: str = "webpte_model.json") -> Ring | None:
    """The ring cache a model folder's meta declares (`sliding_window`, `ring_rows`), or None."""
    window, rows = meta.get("sliding_window"), meta.get("ring_rows")
    if window is None and rows is None:
        return None
    if not (type(window) is int and type(rows) is int and 0 < window <= rows <= 1 << 20):
        raise InputError(f"{where}: sliding_window and ring_rows must be ints with "
                         f"0 < sliding_window <= ring_rows, not {window!r:.20}, {rows!r:.20}")
    return Ring(window, rows)


def make_contract(token_id: Callable[[str], int | None], rows: int, max_context: int,
                  sink_token: str, stop_tokens=(), ring: Ring | None = None) -> Contract:
    """The contract of a decoder taking `rows`-row windows over `max_context` positions, with
    token ids looked up by `token_id` (None when the tokenizer lacks the token) and, for
    sliding-window layers, a ring cache."""
    sink_id = token_id(sink_token)
    if sink_id is None:
        raise InputError(f"the tokenizer has no token {sink_token!r}")
    stops = list(stop_tokens) or list(DEFAULT_STOP_TOKENS)
    stop_ids = frozenset(i for t in stops if (i := token_id(t)) is not None)
    if not stop_ids:
        raise InputError(f"none of the stop tokens {stops} is in the tokenizer")
    if ring is not None and ring.rows < ring.window + rows - 1:
        raise InputError(f"a ring cache of {ring.rows} rows cannot hold a {rows}-row window "
                         f"and the {ring.window - 1} positions before it that it sees")
    return Contract(int(rows), int(max_context), sink_id, sink_token, stop_ids, ring)


def image_key(data: bytes, shape) -> str:
    """The identity of an image in a conversation: a content hash of its pixels (`data`, laid
    out as `shape`), so reuse can tell two pictures apart behind the same <image> tokens."""
    h = hashlib.sha256(repr(tuple(int(d) for d in shape)).encode())
    h.update(data)
    return h.hexdigest()[:32]


def check_sink(ids: list[int], c: Contract) -> None:
    """Position 0 is overwritten with the sink's K/V: refuse prompts that do not start with it."""
    if not ids or ids[0] != c.sink_id:
        raise InputError(f"the prompt must start with the attention-sink token "
                         f"{c.sink_token!r} (id {c.sink_id}) at position 0; it starts with "
                         f"{ids[:1]}")


def reusable_prefix(cached: list[int], ids: list[int], cached_images=(), images=(),
                    image_id: int | None = None) -> int:
    """Positions whose cached K/V can be kept: the common prefix of the two token lists, up to
    the first image whose identity differs. Each run of `image_id` tokens is one image; the
    i-th run holds `cached_images[i]` in the cache and `images[i]` in the new prompt (content
    keys), so a same-text turn about another picture keeps only the rows before it."""
    n, image = 0, -1
    for p, (a, b) in enumerate(zip(cached, ids)):
        if a != b:
            break
        if b == image_id and b is not None:
            if p == 0 or ids[p - 1] != image_id:
                image += 1
            if image >= min(len(images), len(cached_images)) or (
                    images[image] != cached_images[image]):
                break
        n += 1
    return n


def prefill_windows(cached: list[int], ids: list[int], c: Contract,
                    slots: RingSlots | None = None, *, cached_images=(), images=(),
                    image_id: int | None = None) -> tuple[int, list[int]]:
    """(reused positions, window starts) that bring the cache from `cached` to `ids`.

    With a ring cache (`c.ring`, its state in `slots`) the first window sees the `window - 1`
    positions before it: when a slot no longer holds one of them (an earlier turn ran past
    the reused prefix and wrapped onto it) the prompt is fed from position 0, which is
    exact whatever the ring holds (every slot a query sees is rewritten first)."""
    check_sink(ids, c)
    if len(ids) >= c.max_context:
        raise ContextFullError(f"the prompt needs {len(ids)} positions; the context holds "
                               f"{c.max_context}. Start a new conversation (reset)")
    # The newest row is always fed again: its logits give the next token, even when the
    # whole prompt is cached (a regenerated answer to the same conversation).
    reuse = min(reusable_prefix(cached, ids, cached_images, images, image_id), len(ids) - 1)
    starts = extend_starts(reuse, len(ids), c.rows, c.max_context)
    if c.ring is not None and starts and starts[0] > 0:
        first = starts[0]
        if slots is None or not slots.holds(range(max(0, first - c.ring.window + 1), first)):
            reuse, starts = 0, extend_starts(0, len(ids), c.rows, c.max_context)
    return reuse, starts


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
