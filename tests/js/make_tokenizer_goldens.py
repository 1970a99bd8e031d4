"""Goldens for tests/js/tokenizer.test.mjs: ids and decoded text that Python `tokenizers`
(the Rust implementation the native host uses) gives for varied strings, from a model folder's
tokenizer.json.

    python tests/js/make_tokenizer_goldens.py OUT.json [MODEL_FOLDER]

MODEL_FOLDER defaults to the built SmolLM2 folder (`ensure_smollm2()`, built when missing).
The JSON holds the tokenizer files' paths, so the test reads the same tokenizer.json.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer

# Hand-picked cases: whitespace, digits (ASCII and not), contractions, code, emoji, scripts,
# the chat special tokens, and characters where regex engines disagree (U+0085, U+FEFF, ...).
CASES = [
    "", " ", "  ", "\n", "\n\n", "\t", " \t\n ", "a", "Hello world", "Hello  world",
    "Hello world!", "hello, world. How are you?", "What is the capital of France?",
    "I'm sure you'll see they've done it; he'd said we're ok", "'S 'T 'RE",
    "don't DON'T", "12345", "3.14159", "1,000,000", "0xDEADbeef", "2024-06-30T12:00:00Z",
    "٣٤٥ ١٢", "१२३४", "５６７", "Ⅻ ⅻ ½ ² ³", "𝟙𝟚𝟛", "x²+y²=z²",
    "def f(x):\n    return x ** 2\n", "for (let i = 0; i < n; i++) { a[i] += 1; }",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "SELECT * FROM t WHERE a <> 'b';", "<div class=\"x\">&amp;</div>", "a\r\nb\rc",
    "trailing spaces   ", "   leading", "mixed \u00a0nbsp", "thin\u2009space", "ideo\u3000space",
    "nel\u0085here", "bom\ufeffhere", "\ufeff", "zero\u200bwidth", "line\u2028sep",
    "para\u2029sep", "vt\x0bff\x0c", "nul\x00byte", "tab\tsep\tvalues",
    "Ünïcödé façade naïve café", "Straße groß", "Привет, мир!", "Γειά σου Κόσμε",
    "你好，世界！", "こんにちは世界", "안녕하세요 세계", "مرحبا بالعالم", "שלום עולם",
    "नमस्ते दुनिया", "สวัสดีชาวโลก", "ሰላም ዓለም", "Tiếng Việt có dấu",
    "😀", "👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇩🇪", "I ❤️ NY", "emoji🎉in🎉text", "a\u0301e\u0301",
    "<|im_start|>", "<|im_end|>", "<|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
    "<|im_start|>assistant\n", "<|endoftext|>", "text<|im_end|>text", "<|im_start|><|im_start|>",
    "<|im_start |>", "<repo_name>webpte<file_sep>", "<filename>a.py\nprint(1)",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Users\\me\\file.txt",
    "$$\\int_0^1 x^2 dx = \\frac{1}{3}$$", "¯\\_(ツ)_/¯", "...", "!!!???", "—–-",
    "«quoted» “curly”",
    "    indented code", "a" * 300, "ab " * 100, "9" * 50, "\n" * 10 + "x",
]

# Pools for seeded random strings: every category above, mixed.
POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        + list(" \t\n\r.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`")
        + list("éüßçøñ١٢٣०१５ⅫПриветΓειά你好こんにちは안녕مرحباשלוםनमस्ते")
        + ["😀", "🎉", "👍🏽", "❤️", "\u00a0", "\u2009", "\u3000", "\u0085", "\u200b", "\ufeff"]
        + ["<|im_start|>", "<|im_end|>", "'s", "'ll", " the", "ing", "  ", "\n\n"])


def strings(n_random: int = 160, seed: int = 20240630) -> list[str]:
    rng = random.Random(seed)
    out = list(CASES)
    for _ in range(n_random):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def main(out: str, folder: str | None = None) -> None:
    if folder is None:
        from webpte.build.smollm2 import ensure_smollm2

        folder = str(ensure_smollm2())
    tok_dir = Path(folder) / "tokenizer"
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    cases = []
    for s in strings():
        ids = tok.encode(s, add_special_tokens=False).ids
        cases.append({"text": s, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({
        "tokenizer_json": str(tok_dir / "tokenizer.json"),
        "tokenizer_config": str(tok_dir / "tokenizer_config.json"),
        "cases": cases}, ensure_ascii=False))


if __name__ == "__main__":
    main(*sys.argv[1:])
