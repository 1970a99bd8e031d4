"""Native greedy generations of the tiny Gemma 4 model folder (tests/fixtures/gemma4/model)
for tests/browser/gemma4.test.mjs, on the GPU (wgpu-py) and on webpte's numpy interpreter.

    python tests/browser/make_gemma4_generations.py [OUT.json]

Writes (by default tests/fixtures/gemma4/chat_expected.json, committed; tests/test_gemma4_chat.py
checks it is what both backends give today) `{"decoder_sha256", "conversations": [{"history",
"repetition_penalty", "turns": [...]}, ...]}`; a conversation is either `generate`
turns (`prompt`, `max_new_tokens`) in one session, or one chat request (`history`: the
messages before the last, given by the caller). Each turn holds the GPU's stats (token ids,
prompt/reused/computed rows, stop reason), the interpreter's token ids and reused rows, and
`gaps`: per generated token the GPU logit margin of the best token over the runner-up, fed
from scratch window by window, so the page test can tell a genuine tie from a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "gemma4" / "model"
EXPECTED = FOLDER.parent / "chat_expected.json"
# Six tokens keep the follow-up's reuse (the ring still holds the rows the next window sees);
# after twelve the next turn is fed from position 0 (the stripped answer leaves the cache 12
# positions before its end, past the 8-position window).
# The random weights answer newlines greedily; a repetition penalty (applied by the same
# Python sampler to the same logits, still the best token) makes the ids vary.
CONVERSATIONS = [
    {"turns": [("hi", 6), ("tell me more", 12), ("ok", 6)]},
    {"turns": [("hi", 8), ("what is this", 6)], "repetition_penalty": 2.0},
    {"history": [("user", "hi"), ("assistant", "hello there"), ("user", "who are you?"),
                 ("assistant", "a model")], "turns": [("and then?", 10)],
     "repetition_penalty": 2.0},
]


def converse(model, conv) -> list[dict]:
    """Run conversation `conv` (an entry of CONVERSATIONS) in a fresh session of `model`."""
    from webpte.host.prompt import Turn
    from webpte.host.sampling import SamplingOptions

    sampling = SamplingOptions(repetition_penalty=conv.get("repetition_penalty", 1.0))
    session = model.session()
    session.reset()
    out = []
    for prompt, max_new in conv["turns"]:
        session.turns = session.turns or [Turn(r, t) for r, t in conv.get("history", [])]
        before = list(session.turns)
        "".join(session.generate(prompt, max_new_tokens=max_new, sampling=sampling))
        s = session.stats
        out.append({"prompt": prompt, "max_new_tokens": max_new, "token_ids": s.token_ids,
                    "prompt_rows": s.prompt_rows, "reused_rows": s.reused_rows,
                    "computed_rows": s.computed_rows, "stop_reason": s.stop_reason,
                    "prompt_ids": session.prompt_ids(before + [Turn("user", prompt)])})
    return out


def main(out: str) -> None:
    from webpte.host import load_model
    from webpte.host.model import logit_gaps

    gpu, ref = load_model(FOLDER), load_model(FOLDER, backend="reference")
    conversations = []
    for conv in CONVERSATIONS:
        turns = converse(gpu, conv)
        for turn, r in zip(turns, converse(ref, conv), strict=True):
            turn["reference_token_ids"] = r["token_ids"]
            turn["reference_reused_rows"] = r["reused_rows"]
            turn["gaps"] = logit_gaps(gpu, turn["prompt_ids"], turn["token_ids"],
                                 conv.get("repetition_penalty", 1.0))
        conversations.append({"history": conv.get("history", []), "turns": turns,
                              "repetition_penalty": conv.get("repetition_penalty", 1.0)})
    digest = hashlib.sha256((FOLDER / "decoder.pte").read_bytes()).hexdigest()
    Path(out).write_text(json.dumps({"decoder_sha256": digest,
                                     "conversations": conversations}, indent=1) + "\n")


if __name__ == "__main__":
    main(*(sys.argv[1:] or [str(EXPECTED)]))
