"""Comparison helpers shared by the CLI, benchmarks and tests."""

from __future__ import annotations

import numpy as np


def rel_l2(actual, expected) -> float:
    """||actual - expected|| / ||expected|| (absolute when the reference is all zero)."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    denom = np.linalg.norm(e.ravel())
    return float(np.linalg.norm((a - e).ravel()) / (denom if denom > 0 else 1.0))


def greedy_conversation(model, questions, image, max_new_tokens: int) -> dict:
    """Ask `questions` in one session of `model` (a loaded `webpte.host.Model`), the first
    with `image`, greedily; what each turn fed and produced:
    `{"questions", "prompt_ids": [[...], ...], "answer_ids": [[...], ...],
    "reused_rows": [...], "computed_rows": [...]}`."""
    from .host.prompt import Turn

    session = model.session()
    out: dict = {"questions": list(questions), "prompt_ids": [], "answer_ids": [],
                 "reused_rows": [], "computed_rows": []}
    for i, question in enumerate(questions):
        before = list(session.turns)
        session.ask(question, image if i == 0 else None, max_new_tokens=max_new_tokens)
        out["prompt_ids"].append(session.prompt_ids(before + [Turn("user", question, i == 0)]))
        out["answer_ids"].append(list(session.stats.token_ids))
        out["reused_rows"].append(session.stats.reused_rows)
        out["computed_rows"].append(session.stats.computed_rows)
    return out
