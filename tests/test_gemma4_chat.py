"""A tiny Gemma 4 model folder (tools/export_gemma4.py --model-folder: the delegated reduced
Gemma4_31B as a windowed decoder, int8 embeddings with the embed scale in their scales, a
character tokenizer with Gemma's turn format and `<end_of_turn>` as stop token, the sliding
layers' ring cache declared for the host) chats, and greedy ids on the GPU and on the numpy
interpreter are identical (chat_expected.json, which the page test replays). KV reuse across
the ring gives exactly the from-scratch logits."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from webpte.host.model import load_model
from webpte.host.turn import Ring

FOLDER = Path(__file__).parent / "fixtures" / "gemma4" / "model"
QUESTION = "hi"
EXPECTED = json.loads((FOLDER.parent / "chat_expected.json").read_text())


def _generations():
    path = Path(__file__).parent / "browser" / "make_gemma4_generations.py"
    spec = importlib.util.spec_from_file_location("make_gemma4_generations", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_folder_and_prompt_format():
    meta = json.loads((FOLDER / "webpte_model.json").read_text())
    assert meta["stop_tokens"] == ["<end_of_turn>"] and meta["sink_token"] == "<bos>"
    model = load_model(FOLDER, backend="reference")
    text = model.chat.render(model.session().turns + [_turn(QUESTION)])
    assert text == f"<bos><start_of_turn>user\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n"
    assert model.rows == 4 and model.max_context == 128 and model.hidden == 64
    assert model.contract.ring == Ring(window=8, rows=16)


def _turn(text: str):
    from webpte.host.prompt import Turn

    return Turn("user", text, False)


@pytest.mark.parametrize("backend", ["webgpu", "reference"])
def test_chat_expected_json_is_what_the_gpu_and_the_interpreter_give(gpu, backend):
    """Multi-turn chats (generate() follow-ups whose prompts cross the ring, one fed from 0
    after a long stripped answer; a chat history given by the caller) give the committed ids
    and reuse decisions (tests/browser/make_gemma4_generations.py wrote them)."""
    gen = _generations()
    assert EXPECTED["decoder_sha256"] == hashlib.sha256(
        (FOLDER / "decoder.pte").read_bytes()).hexdigest(), "re-run make_gemma4_generations.py"
    model = load_model(FOLDER, backend=backend)
    ids = "token_ids" if backend == "webgpu" else "reference_token_ids"
    rows = "reused_rows" if backend == "webgpu" else "reference_reused_rows"
    for conv, want in zip(gen.CONVERSATIONS, EXPECTED["conversations"], strict=True):
        got = gen.converse(model, conv)
        assert [t["token_ids"] for t in got] == [t[ids] for t in want["turns"]]
        assert [t["reused_rows"] for t in got] == [t[rows] for t in want["turns"]]
        assert [t["prompt_ids"] for t in got] == [t["prompt_ids"] for t in want["turns"]]
    reused = [t["reused_rows"] for c in EXPECTED["conversations"] for t in c["turns"]]
    assert max(reused) > model.contract.ring.rows and 0 in reused[1:]


def test_windows_past_the_ring_agree_on_gpu_and_numpy(gpu):
    """The folder's decoder over windows of a 24-token prompt (past the 16-row ring): the
    random-weight greedy answer is degenerate, so compare the logits themselves."""
    import numpy as np

    from webpte.testing import rel_l2

    gpu_model, ref_model = load_model(FOLDER), load_model(FOLDER, backend="reference")
    ids = gpu_model.chat.encode("<bos>" + "the quick brown fox jumps")
    embeds = gpu_model.embeddings(ids).astype(np.float32)
    for start in range(0, len(ids) - 3):
        args = (embeds[None, start:start + 4], np.array([start], np.int64))
        (a,), (b,) = gpu_model.decoder.run(*args), ref_model.decoder.run(*args)
        assert rel_l2(a, b) <= 1e-4, f"window at {start}"
        assert a.argmax() == b.argmax()


@pytest.mark.parametrize("backend", ["reference"])
def test_webpte_chat_command(backend):
    r = subprocess.run([sys.executable, "-m", "webpte.cli", "chat", "--model", str(FOLDER),
                        "--backend", backend, "--max-new-tokens", "4", QUESTION],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


# --- KV reuse across the sliding layers' ring cache (window 8, 16 ring rows) ---------------

def _feed(model, ids, starts):
    """Feed the windows at `starts` of the prompt `ids`; the last window's logits."""
    import numpy as np

    embeds = model.embeddings(ids).astype(np.float32)
    logits = None
    for s in starts:
        (logits,) = model.decoder.run(embeds[None, s:s + model.rows], np.array([s], np.int64))
    return logits.reshape(-1)


def _reused_vs_scratch(model, old: list[int], new: list[int]):
    """(reuse, logits of `new` fed after `old` with the host's reuse decision, logits of `new`
    from a zeroed cache)."""
    from webpte.host.turn import RingSlots, prefill_windows

    slots = RingSlots(model.contract.ring.rows)
    model.decoder.reset()
    _, starts = prefill_windows([], old, model.contract, slots)
    _feed(model, old, starts)
    for s in starts:
        slots.write(s, model.rows)
    reuse, starts = prefill_windows(old, new, model.contract, slots)
    reused = _feed(model, new, starts)
    model.decoder.reset()
    scratch = _feed(model, new, prefill_windows([], new, model.contract)[1])
    return reuse, reused, scratch


RING_CASES = {
    # old conversation (characters after <bos>), new one, positions the host keeps
    "follow-up past the ring": ("user: hi\nmodel: hello there\n", "user: hi\nmodel: hello there\n"
                                "user: and you? tell me more\n", 29),
    "edit within the window of the end": ("user: hi\nmodel: hello there friend",
                                          "user: hi\nmodel: hello there pal, how are you", 29),
    # The old turn ran 20 positions past the common prefix: it wrapped the ring onto the rows
    # the new turn's first window sees, so the prompt is fed from 0.
    "edit far from the end": ("user: hi\nmodel: a long answer that wraps the ring",
                              "user: hi\nmodel: no", 0),
}


@pytest.mark.parametrize("case", sorted(RING_CASES))
def test_reuse_across_the_ring_gives_the_from_scratch_logits(gpu, case):
    import numpy as np

    old_text, new_text, want_reuse = RING_CASES[case]
    model = load_model(FOLDER)
    old, new = (model.chat.encode("<bos>" + t) for t in (old_text, new_text))
    assert len(old) > model.contract.ring.rows and len(new) > model.contract.ring.rows
    reuse, reused, scratch = _reused_vs_scratch(model, old, new)
    assert reuse == want_reuse
    err = float(np.linalg.norm(reused - scratch) / np.linalg.norm(scratch))
    assert err <= 1e-6, f"{case}: reused rows give logits {err:.3g} rel-L2 from scratch's"
    assert reused.argmax() == scratch.argmax()
