"""Next-token choice: greedy, temperature, top-k, top-p, repetition penalty, seeded.

Pure Python on lists of floats, so it also runs in the page without numpy.
"""

from __future__ import annotations

import math
import random
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


class Sampler:
    """Chooses tokens from logits; one Random per sampler keeps runs reproducible by seed."""

    def __init__(self, options: SamplingOptions | None = None):
        self.options = options or SamplingOptions()
        self.rng = random.Random(self.options.seed)

    def __call__(self, logits, history=()) -> int:
        o = self.options
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
