"""A conversation with a windowed decoder: prompt -> windows -> logits -> tokens.

The KV cache lives in the decoder program. A session remembers which token (and, for image
rows, which picture) sits at each cached position and, for a ring cache, which position each
ring slot holds, so a follow-up turn only computes the rows that changed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import InputError
from .embeddings import splice_rows
from .prompt import Turn
from .sampling import Candidates, Sampler, SamplingOptions
from .turn import RingSlots, decode_window_start, image_key, prefill_windows, stop_reason


@dataclass
class GenerationStats:
    prompt_rows: int = 0          # positions of the rendered prompt
    reused_rows: int = 0          # positions whose K/V came from earlier turns
    computed_rows: int = 0        # prompt positions fed through the decoder this turn
    prefill_windows: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    vision_s: float = 0.0
    stop_reason: str = ""         # stop_token | max_new_tokens | context_full
    token_ids: list[int] = field(default_factory=list)

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.computed_rows / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s if self.decode_s else 0.0


class Session:
    """One conversation. `generate()` streams text pieces; `stats` describes the last turn.

    `turns` is the conversation; it may be replaced by a list of `Turn`s (an edited history)
    whose images are ones this session has seen (their `image_key`)."""

    def __init__(self, model):
        self.model = model
        self.turns: list[Turn] = []
        self.image_rows: dict[str, object] = {}  # (1, rows, hidden) vision embeddings by key
        self.cached: list[int] = []   # token id at each position whose K/V is valid
        self.cached_images: list[str] = []  # keys of the images among those positions
        self.slots = self._fresh_slots()
        self.stats = GenerationStats()

    def _fresh_slots(self) -> RingSlots | None:
        ring = self.model.contract.ring
        return RingSlots(ring.rows) if ring else None

    def reset(self) -> None:
        self.turns, self.cached, self.cached_images, self.image_rows = [], [], [], {}
        self.slots = self._fresh_slots()
        self.model.decoder.reset()

    @property
    def images(self) -> list:
        """The vision embeddings of the conversation's image turns, in order."""
        return [self.image_rows[k] for k in self._image_keys(self.turns)]

    def _image_keys(self, turns: list[Turn]) -> list[str]:
        keys = [t.image_key for t in turns if t.image]
        if any(k not in self.image_rows for k in keys):
            raise InputError("a turn of the conversation holds an image this session has not "
                             "seen (no image_key of a generate() call); ask about it with "
                             "generate(question, image)")
        return keys

    def _embed(self, ids):
        import numpy as np

        m = self.model
        embeds = m.embeddings(ids)                             # (n, hidden)
        if m.image_id is not None:
            where = [i for i, t in enumerate(ids) if t == m.image_id]
            if where:
                images = self.images
                rows = (np.concatenate([e.reshape(-1, m.hidden) for e in images])
                        if images else np.zeros((0, m.hidden), np.float32))
                embeds = splice_rows(embeds, where, rows)
        return embeds

    def _windows(self, embeds, starts: list[int], readout: int | None):
        """Feed the windows at `starts` in one submit: the last one's logits, or the
        `Candidates` of the device readout of `readout` (Sampler.readout)."""
        import numpy as np

        rows = self.model.rows
        calls = [[embeds[None, s:s + rows].astype(np.float32), np.array([s], np.int64)]
                 for s in starts]
        try:
            out = self.model.decoder.run_calls(calls, readout)
        except BaseException:
            self.slots = self._fresh_slots()  # the windows may have written some of their rows
            raise
        if self.slots is not None:
            for s in starts:
                self.slots.write(s, rows)
        return out[0].reshape(-1) if readout is None else Candidates.from_words(out, readout)

    def prompt_ids(self, turns: list[Turn]) -> list[int]:
        m = self.model
        return m.chat.encode(m.chat.render(turns, add_generation_prompt=True))

    def generate(self, question: str, image=None, *, max_new_tokens: int = 256,
                 sampling: SamplingOptions | None = None) -> Iterator[str]:
        """Stream the answer to `question` (optionally about `image`) as text pieces."""
        import numpy as np

        m = self.model
        stats = self.stats = GenerationStats()
        key = None
        if image is not None:
            if m.vision is None:
                raise InputError(f"model {m.name} has no vision program; it takes text only")
            from .image import preprocess_image

            pixels = preprocess_image(image, m.image_size)
            key = image_key(pixels.tobytes(), pixels.shape)
            if key not in self.image_rows:
                t0 = time.perf_counter()
                self.image_rows[key] = m.vision.run(pixels)[0]
                stats.vision_s = time.perf_counter() - t0
        turns = self.turns + [Turn("user", question, key is not None, key)]
        ids = self.prompt_ids(turns)
        keys = self._image_keys(turns)
        reuse, starts = prefill_windows(self.cached, ids, m.contract, self.slots,
                                        cached_images=self.cached_images, images=keys,
                                        image_id=m.image_id)
        self.turns = turns
        embeds = self._embed(ids)
        # Rows past the prefix are rewritten from here on; the prefix's images are `keys`'.
        self.cached, self.cached_images = self.cached[:reuse], keys
        sampler = Sampler(sampling)
        readout = sampler.readout(m.decoder.readouts)
        t0 = time.perf_counter()
        logits = self._windows(embeds, starts, readout) if starts else None
        stats.prefill_s = time.perf_counter() - t0
        stats.prompt_rows, stats.prefill_windows = len(ids), len(starts)
        stats.reused_rows = reuse
        stats.computed_rows = len(ids) - starts[0] if starts else 0
        self.cached = list(ids)
        generated: list[int] = []
        emitted = ""
        t0 = time.perf_counter()
        try:
            while True:
                reason = stop_reason(None, len(generated), len(self.cached), max_new_tokens,
                                     m.contract)
                if reason is None:
                    token = sampler(logits, self.cached)
                    reason = stop_reason(token, len(generated), len(self.cached),
                                         max_new_tokens, m.contract)
                if reason is not None:
                    stats.stop_reason = reason
                    break
                generated.append(token)
                text = m.chat.decode(generated)
                if not text.endswith("\ufffd"):  # hold back a partial UTF-8 sequence
                    piece, emitted = text[len(emitted):], text
                    if piece:
                        yield piece
                row = self._embed([token]).astype(np.float32)
                embeds = np.concatenate([embeds, row])
                logits = self._windows(
                    embeds, [decode_window_start(len(self.cached) + 1, m.contract)], readout)
                self.cached.append(token)
        finally:
            stats.decode_s = time.perf_counter() - t0
            stats.new_tokens = len(generated)
            stats.token_ids = list(generated)
            self.turns = turns + [Turn("assistant", m.chat.decode(generated).strip())]

    def ask(self, question: str, image=None, **kw) -> str:
        """The whole answer as one string."""
        return "".join(self.generate(question, image, **kw))
