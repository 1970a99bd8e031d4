"""Export the tiny VLM model folder: a whole SmolVLM-shaped model small enough to commit.

Dev-only (torch + executorch). It exercises every part of the image path end to end — a q8
vision program taking `[1,3,512,512]` pixel values and giving `[1,64,hidden]` image embeddings,
a windowed q8 decoder with the attention sink, an int8 embedding table and a byte-level BPE
tokenizer with SmolVLM's special tokens and chat format — with seeded random weights, so its
answers are noise; tests compare them with references, not with English.

Writes `tests/fixtures/tiny_vlm/` (a webpte model folder, see webpte.host.files), plus:

* `picture.png`: a 512x512 test picture (no resize on any path, so the native and in-page
  pixel values are identical).
* `eager_reference.npz`: eager PyTorch results of the same q8 modules: the picture's pixel
  values and image embeddings, the first prompt's ids and the logits of its last window.
* `expected.json`: the prompt ids and greedy answer ids of a two-turn conversation about the
  picture, computed with webpte's numpy interpreter of these very programs (exact int8
  arithmetic; `tests/test_tiny_vlm.py` recomputes them, so the file cannot go stale silently).

    python tools/export_tiny_vlm.py [--out tests/fixtures/tiny_vlm]
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(ROOT / "py"))

import decoder_model as dm  # noqa: E402
import export_decoder as ed  # noqa: E402
from export_fixtures import export_program as export_vision  # noqa: E402
from export_fixtures import save_npz  # noqa: E402
from fixture_models import (  # noqa: E402
    TowerConfig,
    VisionTower,
    quantize_linears_q8,
    randomize_norms,
)
from webpte.host.embeddings import quantize_table, splice_rows  # noqa: E402
from webpte.host.files import FORMAT, META_NAME, sha256_file  # noqa: E402
from webpte.host.prompt import SMOLVLM_TEMPLATE, ChatFormat, Turn  # noqa: E402
from webpte.host.windows import window_starts  # noqa: E402

NAME = "tiny VLM (random weights)"
SEED = 7
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<fake_token_around_image>",
            "<image>", "<global-img>", "<end_of_utterance>", "<|reserved_special_token_0|>"]
# A multiple of 8: ExecuTorch 1.5.1 lowers the head to a q8 linear only then (with 263 rows it
# falls back to dequantize_per_channel + an f32 linear, which the published programs lack).
VOCAB = 256 + len(SPECIALS)
assert VOCAB % 8 == 0
HIDDEN = 64
TOWER = TowerConfig(image=512, patch=16, width=32, heads=2, mlp=64, layers=1, text_width=HIDDEN)
DECODER = dm.DecoderConfig(dim=HIDDEN, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16,
                           hidden_dim=96, vocab_size=VOCAB, max_context_len=256, seed=SEED)
# The conversation expected.json records (tests and the page ask the same).
QUESTIONS = ["What is in this picture?", "And its colours?"]
ANSWER_TOKENS = 12
# Random q/k projections give near-uniform attention, which averages the 64 image rows away;
# scaled up, each answer token depends on the picture (a flipped or darker one changes it).
SHARPEN = 4.0
FILES = {"decoder": "decoder_q8.pte", "vision": "vision_q8.pte",
         "embed_tokens": "embed_tokens.i8.bin", "embed_scales": "embed_tokens.scale.f32.bin"}


def log(msg: str) -> None:
    print(f"[tiny_vlm] {msg}", file=sys.stderr, flush=True)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100.."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def write_tokenizer(folder: Path) -> None:
    """Byte-level BPE without merges (one token per byte) plus SmolVLM's special tokens."""
    folder.mkdir(parents=True, exist_ok=True)
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, t in enumerate(SPECIALS)]
    vocab |= {t: 256 + i for i, t in enumerate(SPECIALS)}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    config = {
        "add_bos_token": False, "add_prefix_space": False, "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                 for a in added},
        "bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>",
        "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>",
        "additional_special_tokens": ["<fake_token_around_image>", "<image>",
                                      "<end_of_utterance>"],
        "model_max_length": DECODER.max_context_len, "tokenizer_class": "GPT2Tokenizer",
        "chat_template": SMOLVLM_TEMPLATE,
    }
    for name, data in (("tokenizer.json", tokenizer), ("tokenizer_config.json", config)):
        (folder / name).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n",
                                   encoding="utf-8")


def picture() -> np.ndarray:
    """512x512 RGB uint8: four coloured quadrants, a disc and a diagonal band."""
    y, x = np.mgrid[0:512, 0:512]
    img = np.zeros((512, 512, 3), np.uint8)
    img[(y < 256) & (x < 256)] = (200, 40, 40)
    img[(y < 256) & (x >= 256)] = (40, 160, 60)
    img[(y >= 256) & (x < 256)] = (30, 60, 190)
    img[(y >= 256) & (x >= 256)] = (230, 210, 50)
    img[(x - 300) ** 2 + (y - 220) ** 2 < 90 ** 2] = (250, 250, 250)
    img[np.abs(x - y) < 12] = (20, 20, 20)
    return img


def pixel_values(img: np.ndarray) -> np.ndarray:
    x = img.astype(np.float32) / 255.0
    return np.ascontiguousarray(((x - 0.5) / 0.5).transpose(2, 0, 1)[None])


def build_tower(calibration_pixels: list[np.ndarray]) -> torch.nn.Module:
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    f32 = VisionTower(TOWER)
    randomize_norms(f32, gen)
    f32.eval()
    batches = [(torch.from_numpy(p),) for p in calibration_pixels]
    return quantize_linears_q8(copy.deepcopy(f32), batches).eval()


def conversation_ids(chat: ChatFormat, answers: list[list[int]] | None = None) -> list[list[int]]:
    """Prompt ids of each turn of QUESTIONS (the first with the picture), given the answers."""
    turns, out = [], []
    for i, question in enumerate(QUESTIONS):
        turns.append(Turn("user", question, image=i == 0))
        out.append(chat.encode(chat.render(turns, add_generation_prompt=True)))
        if answers is not None and i < len(answers):
            turns.append(Turn("assistant", chat.decode(answers[i]).strip()))
    return out


def embed_rows(ids, q, scales, image_rows, image_id) -> np.ndarray:
    """What the host feeds: int8 rows times their scale, the image over the <image> rows."""
    rows = q[ids].astype(np.float32) * scales[ids][:, None]
    where = [i for i, t in enumerate(ids) if t == image_id]
    return splice_rows(rows, where, image_rows) if where else rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "tiny_vlm")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    out = args.out
    tmp = out.parent / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0 = time.perf_counter()

    write_tokenizer(tmp / "tokenizer")
    chat = ChatFormat(tmp / "tokenizer")
    image_id = chat.token_id("<image>")
    gen = torch.Generator().manual_seed(SEED + 10)
    table = (torch.randn(VOCAB, HIDDEN, generator=gen) * 0.8).numpy()
    q, scales = quantize_table(table)
    (tmp / FILES["embed_tokens"]).write_bytes(q.tobytes())
    (tmp / FILES["embed_scales"]).write_bytes(scales.astype(np.float32).tobytes())

    from PIL import Image

    img = picture()
    Image.fromarray(img).save(tmp / "picture.png", optimize=True)
    pixels = pixel_values(img)
    other = pixel_values(np.roll(img, 100, axis=1)[:, ::-1].copy())
    tower = build_tower([pixels, other])
    with torch.no_grad():
        image_embeds = tower(torch.from_numpy(pixels)).numpy()
    vision_bytes, hist = export_vision(tower, (torch.from_numpy(pixels),))
    (tmp / FILES["vision"]).write_bytes(vision_bytes)
    log(f"vision: {len(vision_bytes)} B, {sum(hist.values())} delegate ops, "
        f"{time.perf_counter() - t0:.0f}s")

    # Decoder: random weights, sink K/V of the <|im_start|> row, calibrated on the windows the
    # host feeds for the recorded conversation (with the picture's embeddings).
    weights = dm.random_weights(DECODER)
    for name in weights:  # sharper attention, so that answers depend on the picture
        if name.endswith(("attention.wq.weight", "attention.wk.weight")):
            weights[name] = weights[name] * SHARPEN
    sink_row = torch.from_numpy(q[chat.token_id("<|im_start|>")].astype(np.float32)
                                * scales[chat.token_id("<|im_start|>")])
    sink_kv = dm.compute_sink_kv(DECODER, weights, sink_row)
    windows = []
    for ids in conversation_ids(chat, [[ord("a")] * 4]):
        rows = torch.from_numpy(embed_rows(ids, q, scales, image_embeds[0], image_id))
        windows += [(rows[s:s + DECODER.window][None], torch.tensor([s]))
                    for s in window_starts(len(ids), DECODER.window, DECODER.max_context_len)]
    decoder = dm.build_decoder(DECODER, weights, sink_kv=sink_kv, calibration=windows)
    # Eager logits of the first answer token, fed as the host feeds the first prompt.
    first = conversation_ids(chat)[0]
    rows = torch.from_numpy(embed_rows(first, q, scales, image_embeds[0], image_id))
    with torch.no_grad():
        first_logits = decoder.run(
            [(rows[s:s + DECODER.window][None], torch.tensor([s]))
             for s in window_starts(len(first), DECODER.window, DECODER.max_context_len)])[-1]
    decoder.reset_caches()
    dm.register_linear_q8ta_q8csw_meta()
    ed.export_program(decoder, "tiny_vlm_decoder_q8", tmp / FILES["decoder"])
    log(f"decoder: {(tmp / FILES['decoder']).stat().st_size} B, {time.perf_counter() - t0:.0f}s")

    save_npz(tmp / "eager_reference.npz", {
        "pixel_values": pixels, "image_embeds": image_embeds, "prompt_ids": np.array(first),
        "first_logits": first_logits.numpy()})
    names = [*FILES.values(), "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"]
    meta = {"format": FORMAT, "name": NAME, **FILES, "tokenizer": "tokenizer",
            "hidden_size": HIDDEN, "sink_token": "<|im_start|>",
            "stop_tokens": ["<end_of_utterance>"],
            "sha256": {n: sha256_file(tmp / n) for n in names}}
    (tmp / META_NAME).write_text(json.dumps(meta, indent=2) + "\n")

    expected = reference_conversation(tmp)
    (tmp / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    log(f"wrote {out} ({size} B) in {time.perf_counter() - t0:.0f}s; answers "
        f"{[len(a) for a in expected['answer_ids']]} tokens")
    return 0


def reference_conversation(folder: Path) -> dict:
    """Prompt and greedy answer ids of QUESTIONS with webpte's numpy interpreter."""
    from webpte.host import load_model
    from webpte.testing import greedy_conversation

    model = load_model(folder, backend="reference")
    return greedy_conversation(model, QUESTIONS, folder / "picture.png", ANSWER_TOKENS)


if __name__ == "__main__":
    sys.exit(main())
