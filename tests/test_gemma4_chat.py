"""A tiny Gemma 4 model folder (tools/export_gemma4.py --model-folder: the delegated reduced
Gemma4_31B as a windowed decoder, int8 embeddings with the embed scale in their scales, a
character tokenizer with Gemma's turn format and `<end_of_turn>` as stop token) chats, and
greedy ids on the GPU and on the numpy interpreter are identical."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from webpte.host.model import load_model

FOLDER = Path(__file__).parent / "fixtures" / "gemma4" / "model"
QUESTION = "hi"


def _greedy(backend: str) -> tuple[list[int], list[int]]:
    model = load_model(FOLDER, backend=backend)
    session = model.session()
    "".join(session.generate(QUESTION, max_new_tokens=8))
    return session.prompt_ids(session.turns[:1]), session.stats.token_ids


def test_folder_and_prompt_format():
    meta = json.loads((FOLDER / "webpte_model.json").read_text())
    assert meta["stop_tokens"] == ["<end_of_turn>"] and meta["sink_token"] == "<bos>"
    model = load_model(FOLDER, backend="reference")
    text = model.chat.render(model.session().turns + [_turn(QUESTION)])
    assert text == f"<bos><start_of_turn>user\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n"
    assert model.rows == 4 and model.max_context == 32 and model.hidden == 64


def _turn(text: str):
    from webpte.host.prompt import Turn

    return Turn("user", text, False)


def test_greedy_ids_match_on_gpu_and_numpy(gpu):
    prompt, native = _greedy("webgpu")
    prompt_ref, ref = _greedy("reference")
    assert prompt == prompt_ref and len(prompt) > 8
    assert native == ref and len(native) >= 1


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
