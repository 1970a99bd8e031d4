"""Model folders: what a model is made of, validated up front.

A model folder holds a decoder `.pte`, an optional vision `.pte`, the int8 embedding
table and its per-row scales, `tokenizer/` (tokenizer.json, tokenizer_config.json,
special_tokens_map.json) and a meta file. Two layouts are recognised:

* webpte's own: `webpte_model.json` (format below) naming the files.
* the published SmolVLM repo: the file names of shared/docs/smolvlm-files.md, whose
  bytes are checked against the pinned sha256 values.

`webpte_model.json` (all paths relative to the folder)::

    {"format": "webpte-model/1", "name": "...", "decoder": "decoder_q8.pte",
     "vision": null | "vision_q8.pte", "embed_tokens": "embed_tokens.i8.bin",
     "embed_scales": "embed_tokens.scale.f32.bin", "tokenizer": "tokenizer",
     "hidden_size": 576, "sink_token": "<|im_start|>",
     "stop_tokens": ["<|im_end|>"], "sha256": {"decoder_q8.pte": "...", ...}}

A decoder with sliding-window layers on a ring cache (Gemma 4) also declares
`"sliding_window": 8, "ring_rows": 16` (host.turn.ring_of_meta): KV reuse depends on them.
A program that keeps its constants in external data files (ExecuTorch `.ptd`) lists them:
`"decoder_data": ["decoder.ptd", ...]`, `"vision_data": [...]` (pinned by `sha256` like
the rest).
Anything absent is derived from the tokenizer files and the program's constant methods.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WebpteError

META_NAME = "webpte_model.json"
FORMAT = "webpte-model/1"
MAX_META_BYTES = 1 << 20          # a meta file is a few hundred bytes; refuse anything huge
MAX_STOP_TOKENS = 64

# shared/docs/smolvlm-files.md: the published SmolVLM-500M-Instruct q8 WebGPU files.
SMOLVLM_REPO = "executorch-community/SmolVLM-500M-Instruct-ExecuTorch-WebGPU"
SMOLVLM_FILES = {
    "smolvlm_vision_q8.pte": (103839108,
                              "a48d6919aa2067be9a8d615e46f1cac5c8e0ac94a6cea7af9e4798290f5a9747"),
    "smolvlm_decoder_q8.pte": (366912132,
                               "a54d81fbafd289c3b68891b150aa7ba9b069ffc5ecabe4114cc437fa726bc08a"),
    "embed_tokens.i8.bin": (47308800,
                            "d3ea47247be0b0703ca1246335cb3bca5f68a4068e177475388e287d9eb5f385"),
    "embed_tokens.scale.f32.bin": (197120,
                                   "adefdadaae81d572c6094b6826e850f263939d716b74da03484dc20c0769562a"),
    "vlm_meta.json": (201, "b36fcf7ef7da8c2ace5271aa5da5ffaa5f10a779db2095cb69f5eadfc9972ae4"),
    "tokenizer/tokenizer.json": (None,
                                 "5ece781dc8d2b2f3e2f289ca0ae50b17cfc27dd27bfe7971bb8241e0b964331a"),
    "tokenizer/tokenizer_config.json": (
        None, "36c6fd44d07d10fd8180ee6b46dcccf69fb7c06753968ff0d7e17b8bfe17b777"),
    "tokenizer/special_tokens_map.json": (
        None, "aa0ff906077086dfa9734a7f97f68c825877a48f9468807be65504495cdeef09"),
}
SMOLVLM_HIDDEN = 960


class ModelFolderError(WebpteError):
    """A model folder is missing files or holds files that do not match."""

    def __init__(self, folder, problems: list[str]):
        self.problems = list(problems)
        listing = "\n  - ".join(problems)
        super().__init__(f"model folder {folder} is not usable:\n  - {listing}")


@dataclass
class ModelFiles:
    folder: Path
    name: str
    decoder: Path
    vision: Path | None
    embed_tokens: Path
    embed_scales: Path
    tokenizer: Path
    hidden_size: int | None = None
    sink_token: str = "<|im_start|>"
    stop_tokens: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    layout: str = "webpte"
    # The external data files (.ptd) of each program, in the order the meta lists them.
    decoder_data: list[Path] = field(default_factory=list)
    vision_data: list[Path] = field(default_factory=list)


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def resolve_model_folder(folder: str | os.PathLike, *, verify: bool = True) -> ModelFiles:
    """Validate a model folder and name its parts; one error lists every problem."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ModelFolderError(folder, [f"{folder} is not a folder"])
    if (folder / META_NAME).is_file():
        return _webpte_layout(folder, verify)
    if (folder / "smolvlm_decoder_q8.pte").exists() or (folder / "vlm_meta.json").exists():
        return _smolvlm_layout(folder, verify)
    raise ModelFolderError(folder, [
        f"neither {META_NAME} (a webpte model folder) nor the published SmolVLM files "
        f"(smolvlm_decoder_q8.pte, vlm_meta.json, ...) are there"])


@dataclass(frozen=True)
class FileSpec:
    """One file of a model folder: path relative to the folder (always with `/`), what it is,
    and its size and sha256 when they are pinned."""

    name: str
    # meta, decoder, vision, decoder_data / vision_data (a program's .ptd files, in order),
    # embed_tokens, embed_scales, tokenizer, tokenizer_config
    role: str
    size: int | None = None
    sha256: str | None = None


TOKENIZER_FILES = (("tokenizer.json", "tokenizer"), ("tokenizer_config.json", "tokenizer_config"))
_WEBPTE_ROLES = (("decoder", True), ("vision", False), ("embed_tokens", True),
                 ("embed_scales", True))
# The external data files (.ptd) of each program, a list of names.
DATA_ROLES = ("decoder_data", "vision_data")
MAX_DATA_FILES = 256


def confined_name(name, what: str) -> str | None:
    """The problem with `name` as a path inside a model folder, or None when it is a plain
    relative path (`a/b.bin`): no absolute path, drive, URL (`:`, `?`, `#`, `%`-escapes),
    `..`, `.`, backslash, control character or empty part, so a meta file cannot point
    outside its folder (natively) or at another origin (in the page, where names are
    appended to the folder's base URL)."""
    if not isinstance(name, str) or not name:
        return f"{META_NAME}: {what} must be a non-empty string, not {name!r:.60}"
    parts = name.split("/")
    if (len(name) > 255 or name.startswith("/") or any(c in name for c in "\\:?#%")
            or any(ord(c) < 32 or c == "\x7f" for c in name)
            or any(p in ("", ".", "..") for p in parts)):
        return (f"{META_NAME}: {what} {name!r:.80} is not a plain relative path inside the "
                f"model folder (no '..', no absolute path, no URL)")
    return None


def _meta_problems(meta: dict) -> list[str]:
    """Types and bounds of the meta's scalar fields."""
    problems = []
    for key in ("name", "sink_token"):
        if key in meta and not (isinstance(meta[key], str) and len(meta[key]) <= 256):
            problems.append(f"{META_NAME}: {key!r} must be a string of at most 256 characters")
    hidden = meta.get("hidden_size")
    if hidden is not None and not (type(hidden) is int and 0 < hidden <= 1 << 16):
        problems.append(f"{META_NAME}: hidden_size must be an int in 1..65536, not {hidden!r:.40}")
    stops = meta.get("stop_tokens", [])
    if not (isinstance(stops, list) and len(stops) <= MAX_STOP_TOKENS
            and all(isinstance(t, str) and 0 < len(t) <= 256 for t in stops)):
        problems.append(f"{META_NAME}: stop_tokens must be a list of at most {MAX_STOP_TOKENS} "
                        f"non-empty strings")
    digests = meta.get("sha256", {})
    if not (isinstance(digests, dict) and all(
            isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)
            for v in digests.values())):
        problems.append(f"{META_NAME}: sha256 must map file names to 64 hex digits")
    return problems


def webpte_manifest(meta: dict) -> tuple[list[FileSpec], list[str]]:
    """The files a `webpte_model.json` names (with its sha256 values) and the problems of the
    meta itself. Reads no file: the page uses it before fetching anything. Every name must
    be a plain relative path inside the folder (`confined_name`)."""
    problems = []
    if meta.get("format") != FORMAT:
        problems.append(f"{META_NAME} format is {meta.get('format')!r:.60}, expected {FORMAT!r}")
    problems += _meta_problems(meta)
    digests = meta.get("sha256") if isinstance(meta.get("sha256"), dict) else {}
    for name in digests:
        if (why := confined_name(name, "a sha256 entry")) is not None:
            problems.append(why)
    specs = []
    for key, required in _WEBPTE_ROLES:
        name = meta.get(key)
        if name is None:
            if required:
                problems.append(f"{META_NAME} does not name its {key!r} file")
            continue
        if (why := confined_name(name, f"{key!r}")) is not None:
            problems.append(why)
            continue
        specs.append(FileSpec(name, key, None, digests.get(name)))
    for key in DATA_ROLES:
        names = meta.get(key, [])
        if not (isinstance(names, list) and len(names) <= MAX_DATA_FILES):
            problems.append(f"{META_NAME}: {key!r} must be a list of at most {MAX_DATA_FILES} "
                            f"file names")
            continue
        if names and meta.get(key.removesuffix("_data")) is None:
            problems.append(f"{META_NAME} lists {key!r} but names no "
                            f"{key.removesuffix('_data')!r} program")
        for name in names:
            if (why := confined_name(name, f"a {key!r} entry")) is not None:
                problems.append(why)
                continue
            specs.append(FileSpec(name, key, None, digests.get(name)))
    tok = meta.get("tokenizer", "tokenizer")
    tok = tok.rstrip("/") if isinstance(tok, str) else tok
    if (why := confined_name(tok, "'tokenizer'")) is not None:
        problems.append(why)
        return specs, problems
    for file, role in TOKENIZER_FILES:
        name = f"{tok}/{file}"
        specs.append(FileSpec(name, role, None, digests.get(name)))
    return specs, problems


def smolvlm_manifest() -> list[FileSpec]:
    """The published SmolVLM files with their pinned sizes and sha256 values."""
    roles = {"smolvlm_vision_q8.pte": "vision", "smolvlm_decoder_q8.pte": "decoder",
             "embed_tokens.i8.bin": "embed_tokens", "embed_tokens.scale.f32.bin": "embed_scales",
             "vlm_meta.json": "meta", "tokenizer/tokenizer.json": "tokenizer",
             "tokenizer/tokenizer_config.json": "tokenizer_config",
             "tokenizer/special_tokens_map.json": "special_tokens_map"}
    return [FileSpec(name, roles[name], size, digest)
            for name, (size, digest) in SMOLVLM_FILES.items()]


def folder_manifest(meta_name: str, meta: dict | None = None, where: str = "the model folder"
                    ) -> dict:
    """What the page needs to fetch and check a model folder known by its meta file:
    `{"layout", "name", "files": [FileSpec fields], "sink_token", "stop_tokens",
    "hidden_size"}`. `meta_name` is `webpte_model.json` (its parsed content in `meta`) or
    `vlm_meta.json` (the published SmolVLM layout). Raises ModelFolderError."""
    if meta_name == META_NAME:
        if not isinstance(meta, dict):
            raise ModelFolderError(where, [f"{META_NAME} is not a JSON object"])
        specs, problems = webpte_manifest(meta)
        if problems:
            raise ModelFolderError(where, problems)
        out = {"layout": "webpte", "name": meta.get("name", "model"),
               "files": [FileSpec(META_NAME, "meta")] + specs,
               "sink_token": meta.get("sink_token", "<|im_start|>"),
               "stop_tokens": list(meta.get("stop_tokens", [])),
               "hidden_size": meta.get("hidden_size")}
    elif meta_name == "vlm_meta.json":
        out = {"layout": "smolvlm", "name": "SmolVLM-500M-Instruct", "files": smolvlm_manifest(),
               "sink_token": "<|im_start|>", "stop_tokens": ["<end_of_utterance>"],
               "hidden_size": SMOLVLM_HIDDEN}
    else:
        raise ModelFolderError(where, [
            f"neither {META_NAME} (a webpte model folder) nor the published SmolVLM files "
            f"(smolvlm_decoder_q8.pte, vlm_meta.json, ...) are there"])
    out["files"] = [vars(f) for f in out["files"]]
    return out


def _inside(folder: Path, name: str) -> bool:
    """`name` resolves (symbolic links followed) to a path inside `folder`."""
    root = folder.resolve()
    return (folder / name).resolve().is_relative_to(root)


def _webpte_layout(folder: Path, verify: bool) -> ModelFiles:
    meta_path = folder / META_NAME
    if meta_path.stat().st_size > MAX_META_BYTES:
        raise ModelFolderError(folder, [f"{META_NAME} is {meta_path.stat().st_size} bytes; a "
                                        f"meta file is at most {MAX_META_BYTES}"])
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError, RecursionError) as e:   # RecursionError: nested too deep
        raise ModelFolderError(folder, [f"{META_NAME} is not valid JSON: {e}"]) from e
    if not isinstance(meta, dict):
        raise ModelFolderError(folder, [f"{META_NAME} is not a JSON object"])
    specs, problems = webpte_manifest(meta)     # names that are not confined are not in specs
    for spec in specs:
        if not _inside(folder, spec.name):
            problems.append(f"{spec.name} leads outside the model folder (a symbolic link?)")
        elif not (folder / spec.name).exists():
            tokenizer_file = spec.role.startswith("tokenizer")
            problems.append(f"missing {spec.name}" + ("" if tokenizer_file else f" ({spec.role})"))
    if verify and not problems:
        for name, want in meta.get("sha256", {}).items():
            if not _inside(folder, name) or not (folder / name).is_file():
                problems.append(f"{name} (in the sha256 table of {META_NAME}) is not a file of "
                                f"the folder")
            elif sha256_file(folder / name) != want:
                problems.append(f"{name} does not match its sha256 in {META_NAME}")
    if problems:
        raise ModelFolderError(folder, problems)

    def path(key):
        name = meta.get(key)
        return None if name is None else folder / name

    files = ModelFiles(
        folder=folder, name=meta.get("name", folder.name), decoder=path("decoder"),
        vision=path("vision"), embed_tokens=path("embed_tokens"),
        embed_scales=path("embed_scales"), tokenizer=folder / meta.get("tokenizer", "tokenizer"),
        hidden_size=meta.get("hidden_size"), sink_token=meta.get("sink_token", "<|im_start|>"),
        stop_tokens=list(meta.get("stop_tokens", [])), meta=meta, layout="webpte",
        decoder_data=[folder / n for n in meta.get("decoder_data", [])],
        vision_data=[folder / n for n in meta.get("vision_data", [])])
    return files


def _smolvlm_layout(folder: Path, verify: bool) -> ModelFiles:
    problems = []
    for name, (size, digest) in SMOLVLM_FILES.items():
        p = folder / name
        if not p.is_file():
            problems.append(f"missing {name}")
        elif size is not None and p.stat().st_size != size:
            problems.append(f"{name} is {p.stat().st_size} bytes, the published file is {size}")
        elif verify and sha256_file(p) != digest:
            problems.append(f"{name} does not match the published sha256 {digest[:12]}...")
    if problems:
        raise ModelFolderError(folder, problems)
    try:
        meta = json.loads((folder / "vlm_meta.json").read_text())
    except ValueError as e:
        raise ModelFolderError(folder, [f"vlm_meta.json is not valid JSON: {e}"]) from e
    return ModelFiles(
        folder=folder, name="SmolVLM-500M-Instruct", decoder=folder / "smolvlm_decoder_q8.pte",
        vision=folder / "smolvlm_vision_q8.pte", embed_tokens=folder / "embed_tokens.i8.bin",
        embed_scales=folder / "embed_tokens.scale.f32.bin", tokenizer=folder / "tokenizer",
        hidden_size=int(meta.get("hidden_size", meta.get("dim", SMOLVLM_HIDDEN))),
        stop_tokens=["<end_of_utterance>"], meta=meta, layout="smolvlm")
