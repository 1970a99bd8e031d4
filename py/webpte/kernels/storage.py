"""How tensors of each dtype are stored in GPU buffers."""

from __future__ import annotations

from ..errors import PlanError
from ..pte.graph import DType, TensorValue

# Serialized dtype -> storage kind. 64-bit ints are narrowed to i32 (as the
# exporter does for constants); int8/uint8 are packed four to a u32 word.
_STORAGE = {
    DType.FLOAT32: "f32",
    DType.INT32: "i32",
    DType.INT64: "i32",
    DType.INT8: "i8",
    DType.UINT8: "u8",
    DType.BOOL: "bool",
}
# WGSL element type of the storage array.
WGSL_TYPE = {"f32": "f32", "i32": "i32", "i8": "u32", "u8": "u32", "bool": "u32"}
PACKED = {"i8", "u8"}


def storage_of(t: TensorValue) -> str:
    try:
        return _STORAGE[t.dtype]
    except KeyError:
        raise PlanError(f"tensors of dtype {t.dtype.name} are not supported on the GPU "
                        f"(supported: float32, int32, int64, int8, uint8, bool)") from None


def storage_bytes(t: TensorValue) -> int:
    """Buffer size for a tensor: packed bytes rounded up to a whole word, at least 4."""
    kind = storage_of(t)
    n = t.numel
    raw = n if kind in PACKED else 4 * n
    return max(4, (raw + 3) // 4 * 4)


def file_convert(t: TensorValue, nbytes: int) -> str | None:
    """How a constant's `nbytes` raw file bytes become its buffer content: bools widen to
    words; int64 data (a program's own constants; delegates store int64 as int32) narrows to
    int32, each value checked to fit when it is loaded."""
    if t.dtype == DType.BOOL:
        return "u8_to_u32"
    if t.dtype == DType.INT64 and t.numel and nbytes == 8 * t.numel:
        return "i64_to_i32"
    return None


def constant_key(graph, t: TensorValue) -> tuple:
    """Constants with equal keys hold the same buffer content (one buffer in a plan):
    same file bytes, same conversion, same size."""
    ref = graph.constants[t.constant_id]
    return (ref.file, ref.offset, ref.nbytes, ref.pieces, ref.stride,
            file_convert(t, ref.nbytes), storage_bytes(t))
