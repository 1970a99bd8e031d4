"""A character-level tokenizer of a given vocab size for random-weight model folders (no real
tokenizer of these shapes is reachable offline). Imports `tokenizers` only, not torch."""

from __future__ import annotations

from pathlib import Path


def save_char_tokenizer(out: Path, vocab: int, specials: list[str]) -> None:
    """`out`/tokenizer.json: a `tokenizers` BPE without merges of `vocab` ids: `specials`
    (added as special tokens), then printable ASCII and newline, then filler pieces."""
    from tokenizers import Tokenizer, decoders, models

    pieces = specials + [chr(c) for c in range(32, 127)] + ["\n"]
    pieces += [f"<unused{i}>" for i in range(vocab - len(pieces))]
    tok = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[]))
    tok.add_special_tokens(specials)
    tok.decoder = decoders.Fuse()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
