"""Native greedy generations for tests/browser/model.test.mjs: the token ids the wgpu-py host
(`webpte.host.load_model(...).session()`) gives for a few conversations of the SmolLM2 folder.

    python tests/browser/make_native_generations.py OUT.json

Writes `{"folder", "key", "conversations": [[turn, ...], ...]}`; each turn holds its prompt,
max_new_tokens and the Session's stats (token ids, rows, stop reason, tokens/s). The folder
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
    key = hashlib.sha256(((folder / "webpte_model.json").read_text()
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
        conversations.append(done)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"folder": str(folder), "key": key,
                                "conversations": conversations}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
