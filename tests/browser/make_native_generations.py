"""Native greedy generations for tests/browser/model.test.mjs: the token ids the wgpu-py host
(`webpte.host.load_model(...).session()`) gives for a few conversations of the SmolLM2 folder.

    python tests/browser/make_native_generations.py OUT.json

Writes `{"folder", "key", "conversations": [[turn, ...], ...]}`; each turn holds its prompt,
max_new_tokens and the Session's stats (token ids, rows, stop reason, tokens/s); a first turn
also holds `top`: per generated token the native logits' five best `[id, logit]`, replayed
window by window, so the page test can tell a near-tie (another driver's float sums may
pick the runner-up) from a wrong answer. The folder
comes from `ensure_smollm2()` (built when missing). An OUT.json made from the same model
files and conversations is kept (the runs take a minute on lavapipe).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

# Each conversation starts fresh (reset); later turns reuse the KV cache of earlier ones.
CONVERSATIONS = [
    [("What is the capital of France?", 16), ("And of Italy?", 8)],
    [("Name three colors of the rainbow.", 16)],
    [("Write one sentence about the sea.", 16)],
]


def main(out: str) -> None:
    from webpte.build.smollm2 import ensure_smollm2

    folder = ensure_smollm2()
    key = hashlib.sha256(((folder / "webpte_model.json").read_text() + "top5"
                          + json.dumps(CONVERSATIONS)).encode()).hexdigest()
    path = Path(out)
    if path.is_file():
        try:
            if json.loads(path.read_text()).get("key") == key:
                return
        except ValueError:
            pass
    from webpte.host import load_model

    model = load_model(folder, verify=False)
    session = model.session()
    conversations = []
    for turns in CONVERSATIONS:
        session.reset()
        done = []
        for prompt, max_new in turns:
            t0 = time.perf_counter()
            text = "".join(session.generate(prompt, max_new_tokens=max_new))
            s = session.stats
            done.append({"prompt": prompt, "max_new_tokens": max_new, "text": text,
                         "token_ids": s.token_ids, "prompt_rows": s.prompt_rows,
                         "reused_rows": s.reused_rows, "computed_rows": s.computed_rows,
                         "stop_reason": s.stop_reason,
                         "prefill_tokens_per_s": s.prefill_tokens_per_s,
                         "decode_tokens_per_s": s.decode_tokens_per_s,
                         "seconds": time.perf_counter() - t0})
        done[0]["top"] = _top5(model, done[0]["prompt"], done[0]["token_ids"])
        conversations.append(done)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"folder": str(folder), "key": key,
                                "conversations": conversations}, indent=1))


def _top5(model, prompt: str, tokens: list[int]) -> list:
    """The five best [id, logit] of the native logits before each generated token of a
    first turn, fed window by window as the Session feeds them."""
    import numpy as np

    from webpte.host.turn import decode_window_start, prefill_windows

    session = model.session()
    ids = session.prompt_ids([*session.turns, _turn(prompt)])
    embeds = model.embeddings(ids)
    model.decoder.reset()

    def window(start: int) -> np.ndarray:
        (logits,) = model.decoder.run(embeds[None, start:start + model.rows],
                                      np.array([start], np.int64))
        return logits.reshape(-1)

    for start in prefill_windows([], ids, model.contract)[1]:
        logits = window(start)
    top = []
    for step, token in enumerate(tokens):
        best = np.argsort(-logits)[:5]
        top.append([[int(t), float(logits[t])] for t in best])
        ids.append(token)
        embeds = np.concatenate([embeds, model.embeddings([token])])
        if step + 1 < len(tokens):
            logits = window(decode_window_start(len(ids), model.contract))
    model.decoder.reset()
    return top


def _turn(prompt: str):
    from webpte.host.prompt import Turn

    return Turn("user", prompt)


if __name__ == "__main__":
    main(*sys.argv[1:])
