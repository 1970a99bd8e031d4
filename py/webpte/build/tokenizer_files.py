"""`tokenizer/` files (tokenizer.json, tokenizer_config.json, special_tokens_map.json) rebuilt
from the vocabulary of a GPT-2-style (byte-level BPE) GGUF.

The GGUF holds the byte-level token strings (`tokenizer.ggml.tokens`, ids = positions), their
types (`tokenizer.ggml.token_type`: 1 normal, 3 control, 4 user-defined), the BPE merges and the
name of llama.cpp's pre-tokenizer (`tokenizer.ggml.pre`). For "smollm" that pre-tokenizer is:
every digit split off alone (`\\p{N}`), then the GPT-2 regex of byte-level BPE.

Pure Python (the JSON is data); `tokenizers` is only needed to use the result.
"""

from __future__ import annotations

import json
from pathlib import Path

from .gguf_weights import GgufError, GgufModel

__all__ = ["special_tokens_map", "tokenizer_config", "tokenizer_json", "write_tokenizer"]

CONTROL, USER_DEFINED = 3, 4
# llama.cpp pre-tokenizer names -> the HF pre-tokenizer steps before byte-level BPE
_PRE_SPLITS = {
    "smollm": [{"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated",
                "invert": False}],
}


def _vocab(model: GgufModel) -> tuple[list[str], list[int], list[str]]:
    if model.require("tokenizer.ggml.model") != "gpt2":
        raise GgufError(f"{model.path.name}: tokenizer {model.value('tokenizer.ggml.model')!r} "
                        f"is not byte-level BPE (gpt2)")
    tokens = list(model.require("tokenizer.ggml.tokens"))
    types = [int(t) for t in model.value("tokenizer.ggml.token_type", [1] * len(tokens))]
    merges = list(model.require("tokenizer.ggml.merges"))
    if len(types) != len(tokens):
        raise GgufError(f"{len(types)} token types for {len(tokens)} tokens")
    return tokens, types, merges


def _added(content: str, tid: int, special: bool) -> dict:
    return {"id": tid, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": not special, "special": special}


def tokenizer_json(model: GgufModel) -> dict:
    """The `tokenizers` JSON of the GGUF's tokenizer."""
    tokens, types, merges = _vocab(model)
    pre = model.value("tokenizer.ggml.pre", "default")
    if pre not in _PRE_SPLITS:
        raise GgufError(f"pre-tokenizer {pre!r} is not supported (only {sorted(_PRE_SPLITS)})")
    pairs = []
    for m in merges:
        parts = m.split(" ")
        if len(parts) != 2:
            raise GgufError(f"merge {m!r} is not two byte-level tokens")
        pairs.append(parts)
    added = [_added(t, i, ty == CONTROL) for i, (t, ty) in enumerate(zip(tokens, types))
             if ty in (CONTROL, USER_DEFINED)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": _PRE_SPLITS[pre] + [byte_level]},
        "post_processor": None,
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": pairs},
    }


_SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id",
                "unk_token": "unknown_token_id", "pad_token": "padding_token_id"}


def special_tokens_map(model: GgufModel) -> dict:
    """bos/eos/unk/pad tokens named by the GGUF, plus the other control tokens."""
    tokens, types, _ = _vocab(model)
    out = {}
    for name, key in _SPECIAL_IDS.items():
        tid = model.value(f"tokenizer.ggml.{key}")
        if tid is not None:
            out[name] = tokens[int(tid)]
    named = set(out.values())
    out["additional_special_tokens"] = [t for t, ty in zip(tokens, types)
                                        if ty == CONTROL and t not in named]
    return out


def tokenizer_config(model: GgufModel) -> dict:
    """tokenizer_config.json: chat template, special tokens, added-token table."""
    tokens, types, _ = _vocab(model)
    cfg: dict = {
        "add_bos_token": bool(model.value("tokenizer.ggml.add_bos_token", False)),
        "add_prefix_space": bool(model.value("tokenizer.ggml.add_space_prefix", False)),
        "added_tokens_decoder": {str(i): {k: v for k, v in _added(t, i, ty == CONTROL).items()
                                          if k != "id"}
                                 for i, (t, ty) in enumerate(zip(tokens, types))
                                 if ty in (CONTROL, USER_DEFINED)},
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(model.value("llama.context_length", 2048)),
        "tokenizer_class": "GPT2Tokenizer",
        "vocab_size": len(tokens),
    }
    cfg.update(special_tokens_map(model))
    template = model.value("tokenizer.chat_template")
    if template is not None:
        cfg["chat_template"] = template
    return cfg


def write_tokenizer(model: GgufModel, folder: str | Path) -> list[Path]:
    """Write tokenizer.json, tokenizer_config.json, special_tokens_map.json into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"tokenizer.json": tokenizer_json(model),
             "tokenizer_config.json": tokenizer_config(model),
             "special_tokens_map.json": special_tokens_map(model)}
    out = []
    for name, data in files.items():
        path = folder / name
        path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        out.append(path)
    return out
