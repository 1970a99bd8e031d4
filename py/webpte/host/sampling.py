"""Next-token choice: greedy, temperature, top-k, top-p, repetition penalty, seeded.

Pure Python on lists of floats, so it also runs in the page without numpy.

The decoder can rank its logits on the device (Plan.readouts: the best k ids and their
logits, larger logit first and equal logits by lower id, the order used here), so a step
reads back a few words instead of the vocabulary. `Sampler.readout` says which readout a
choice needs; it is exact, never an approximation: greedy needs the first id, top-k
sampling the best k (k within the readout's size); temperature sampling over the whole
vocabulary, top-p without top-k, and a repetition penalty (which reorders the scores)
need the whole row and get it.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingOptions:
    temperature: float = 0.0          # 0 means greedy
    top_k: int = 0                    # 0 means no limit
    top_p: float = 1.0
    repetition_penalty: float = 1.0   # > 1 discourages tokens already seen
    seed: int | None = None

    def __post_init__(self):
        if self.temperature < 0 or not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")


@dataclass(frozen=True)
class Candidates:
    """The best logits of a row, best first: token ids and (except for an argmax readout)
    their logits."""

    ids: list[int]
    logits: list[float] | None = None

    @staticmethod
    def from_words(words, k: int) -> Candidates:
        """A readout's uint32 words: k ids, then k float32 logits (only the id for k = 1)."""
        raw = bytes(words)
        n = len(raw) // 4
        ids = list(struct.unpack(f"<{min(n, k)}I", raw[:4 * min(n, k)]))
        if n < 2 * k:
            return Candidates(ids)
        return Candidates(ids, list(struct.unpack(f"<{k}f", raw[4 * k:8 * k])))


class Sampler:
    """Chooses tokens from logits; one Random per sampler keeps runs reproducible by seed."""

    def __init__(self, options: SamplingOptions | None = None):
        self.options = options or SamplingOptions()
        self.rng = random.Random(self.options.seed)

    def readout(self, available: Sequence[int]) -> int | None:
        """The smallest device readout (of the `available` k) that holds everything this
        choice looks at, or None when it needs the whole row of logits."""
        o = self.options
        if o.repetition_penalty != 1.0:
            need = None
        elif o.temperature == 0.0:
            need = 1
        else:
            need = o.top_k or None
        fits = [k for k in available if need is not None and k >= need]
        return min(fits) if fits else None

    def __call__(self, logits, history=()) -> int:
        """The next token from a whole row of logits, or from the `Candidates` of the
        readout `readout()` chose (the same token either way)."""
        o = self.options
        if isinstance(logits, Candidates):
            if o.temperature == 0.0:
                return logits.ids[0]
            order = logits.ids[: o.top_k]
            # top_k = 1 reads the id alone: its one weight is 1 whatever its logit.
            return self._draw(order, dict(zip(order, logits.logits or [0.0])))
        scores = list(map(float, logits))
        if o.repetition_penalty != 1.0:
            for t in set(history):
                if 0 <= t < len(scores):
                    s = scores[t]
                    scores[t] = s / o.repetition_penalty if s > 0 else s * o.repetition_penalty
        if o.temperature == 0.0:  # the first maximum, like max(range(n), key=...), C-fast
            return scores.index(max(scores))
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        if o.top_k:
            order = order[: o.top_k]
        return self._draw(order, scores)

    def _draw(self, order: list[int], scores) -> int:
        """Draw from the tokens `order` (best first), weighted by softmax(scores / T)."""
        o = self.options
        top = scores[order[0]]
        weights = [math.exp((scores[i] - top) / o.temperature) for i in order]
        total = sum(weights)
        probs = [w / total for w in weights]
        if o.top_p < 1.0:
            acc, keep = 0.0, 0
            for keep, p in enumerate(probs, 1):  # noqa: B007 - keep is the count kept
                acc += p
                if acc >= o.top_p:
                    break
            order, probs = order[:keep], probs[:keep]
            total = sum(probs)
            probs = [p / total for p in probs]
        r = self.rng.random()
        acc = 0.0
        for i, p in zip(order, probs):
            acc += p
            if r < acc:
                return i
        return order[-1]
