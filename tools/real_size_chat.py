"""A chat model folder around an exported real-size windowed decoder, and its greedy ids.

The real-size exporters (tools/export_decoder.py --real-size) write a windowed decoder whose
inputs are embeddings, as SmolLM2's and SmolVLM's are; chatting with it needs the rest of a
model folder. This tool makes one with seeded random int8 embeddings of the program's vocab
and width and a character-level ChatML tokenizer of the program's vocab (no real tokenizer of
these shapes is reachable offline, and random weights say nothing in any language), then
records the greedy ids of one chat turn on webpte's numpy interpreter and, natively, on the
GPU, for tools/chat_page.mjs to compare the page with.

    python tools/real_size_chat.py folder DECODER.pte OUT_DIR      # hard-links the decoder
    python tools/real_size_chat.py expect OUT_DIR [--prompt hi] [--tokens 8] [--limits default]

`expect` writes OUT_DIR/chat_expected.json: {"prompt", "max_new_tokens", "decoder_sha256",
"gpu": {token_ids, seconds}, "reference": {token_ids, seconds}, "gaps"} where gaps[k] is the
GPU's logit margin of the best token over the runner-up before generated token k (a near-tie
lets another driver's float sums pick the runner-up). Exits 1 when the GPU and the
interpreter disagree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT / "tools"))

from char_tokenizer import save_char_tokenizer  # noqa: E402
from webpte.pte import open_source, read_program  # noqa: E402

SEED = 0
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def program_shape(decoder: Path) -> tuple[int, int]:
    """(vocab, width) of a windowed decoder: its get_vocab_size and its embeddings' width."""
    prog = read_program(open_source(decoder))
    vocab = prog.method("get_vocab_size").constant
    embeds = prog.method("forward").inputs[0]
    if not isinstance(vocab, int) or len(embeds.shape) != 3:
        raise SystemExit(f"{decoder}: not a windowed decoder (get_vocab_size {vocab!r}, "
                         f"first input {embeds.shape})")
    return vocab, embeds.shape[-1]


def write_tokenizer(out: Path, vocab: int) -> None:
    """A character-level tokenizer (`tokenizers` BPE without merges) of `vocab` ids: ChatML's
    special tokens, printable ASCII and newline, then filler pieces."""
    save_char_tokenizer(out, vocab, SPECIALS)
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": CHAT_TEMPLATE},
        indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))


def write_folder(decoder: Path, out: Path) -> None:
    t0 = time.perf_counter()
    vocab, width = program_shape(decoder)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "decoder.pte"
    if target.exists():
        target.unlink()
    try:
        os.link(decoder, target)
    except OSError:
        import shutil

        shutil.copyfile(decoder, target)
    # Per-row symmetric int8 rows of unit-scale Gaussian embeddings, written in row blocks.
    rng = np.random.default_rng(SEED)
    scales = np.empty(vocab, np.float32)
    with open(out / "embed_tokens.i8.bin", "wb") as f:
        for start in range(0, vocab, 8192):
            w = rng.standard_normal((min(8192, vocab - start), width), dtype=np.float32)
            s = np.abs(w).max(axis=1) / 127.0
            f.write(np.clip(np.rint(w / s[:, None]), -127, 127).astype(np.int8).tobytes())
            scales[start:start + len(w)] = s
    (out / "embed_tokens.scale.f32.bin").write_bytes(scales.tobytes())
    write_tokenizer(out / "tokenizer", vocab)
    files = ["decoder.pte", "embed_tokens.i8.bin", "embed_tokens.scale.f32.bin",
             "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json",
             "tokenizer/special_tokens_map.json"]
    meta = {"format": "webpte-model/1", "name": f"{decoder.stem} (random weights)",
            "decoder": "decoder.pte", "vision": None, "embed_tokens": "embed_tokens.i8.bin",
            "embed_scales": "embed_tokens.scale.f32.bin", "tokenizer": "tokenizer",
            "hidden_size": width, "sink_token": "<|im_start|>", "stop_tokens": ["<|im_end|>"],
            "sha256": {f: _sha256(out / f) for f in files}}
    (out / "webpte_model.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"model folder {out}: vocab {vocab}, width {width}, "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


def greedy(model, prompt: str, tokens: int) -> tuple[list[int], list[int], float]:
    """(prompt ids, generated ids, seconds) of one greedy turn in a fresh session."""
    from webpte.host.prompt import Turn

    session = model.session()
    session.reset()
    t0 = time.perf_counter()
    "".join(session.generate(prompt, max_new_tokens=tokens))
    seconds = time.perf_counter() - t0
    return session.prompt_ids([Turn("user", prompt)]), list(session.stats.token_ids), seconds


def expect(folder: Path, prompt: str, tokens: int, limits) -> int:
    from webpte.host import load_model
    from webpte.host.model import logit_gaps

    result = {"prompt": prompt, "max_new_tokens": tokens,
              "decoder_sha256": _sha256(folder / "decoder.pte")}
    gpu = load_model(folder, limits=limits)
    prompt_ids, ids, secs = greedy(gpu, prompt, tokens)
    result["prompt_ids"] = prompt_ids
    result["gpu"] = {"token_ids": ids, "seconds": round(secs, 2)}
    result["gaps"] = logit_gaps(gpu, prompt_ids, ids)
    print(f"gpu: {ids} in {secs:.1f} s", flush=True)
    del gpu
    ref = load_model(folder, backend="reference")
    _, ref_ids, ref_secs = greedy(ref, prompt, tokens)
    result["reference"] = {"token_ids": ref_ids, "seconds": round(ref_secs, 2)}
    print(f"interpreter: {ref_ids} in {ref_secs:.1f} s", flush=True)
    (folder / "chat_expected.json").write_text(json.dumps(result, indent=1) + "\n")
    if ref_ids != ids:
        print("the GPU and the interpreter disagree", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("folder", help="write a model folder around DECODER.pte")
    f.add_argument("decoder", type=Path)
    f.add_argument("out", type=Path)
    e = sub.add_parser("expect", help="greedy ids on the GPU and the interpreter")
    e.add_argument("folder", type=Path)
    e.add_argument("--prompt", default="hi")
    e.add_argument("--tokens", type=int, default=8)
    e.add_argument("--limits", default=None, help="'default': plan within WebGPU's defaults")
    args = ap.parse_args(argv)
    if args.cmd == "folder":
        write_folder(args.decoder, args.out)
        return 0
    return expect(args.folder, args.prompt, args.tokens, args.limits)


if __name__ == "__main__":
    sys.exit(main())
