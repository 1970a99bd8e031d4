"""A method's inputs and outputs as their plan buffers hold them (IOSpec.storage), for the
executors and the interpreter: host arrays <-> buffer bytes, with the checks a caller's
arrays get (shape, dtype, range)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, PlanError
from .model import IOSpec

_NP_STORAGE = {"f32": np.float32, "i32": np.int32, "i8": np.int8, "u8": np.uint8,
               "bool": np.uint32}


def to_storage_bytes(arr: np.ndarray, spec: IOSpec, what: str) -> bytes:
    """Host array -> the bytes its GPU buffer holds (narrowing int64 to i32)."""
    arr = np.asarray(arr)
    if tuple(arr.shape) != tuple(spec.shape):
        raise InputError(f"{what} has shape {list(arr.shape)}, the method takes "
                         f"{list(spec.shape)}")
    kind = spec.storage
    if kind == "f32" and arr.dtype.kind not in "fiu":
        raise InputError(f"{what} has dtype {arr.dtype}, the method takes {spec.dtype}")
    if kind in ("i32", "i8", "u8") and arr.dtype.kind not in "iub":
        raise InputError(f"{what} has dtype {arr.dtype}, the method takes {spec.dtype}")
    target = _NP_STORAGE[kind]
    if kind == "bool":   # one u32 word per element, 0 or 1 (as web/plan.js toStorage writes)
        arr = arr != 0
    if kind != "f32" and arr.size:
        info = np.iinfo(target) if kind != "bool" else None
        if info is not None and (arr.min() < info.min or arr.max() > info.max):
            raise InputError(f"{what} holds values outside {np.dtype(target).name}")
    raw = np.ascontiguousarray(arr.astype(target, copy=False)).tobytes()
    pad = (-len(raw)) % 4
    return raw + b"\0" * pad if pad or raw else raw or b"\0\0\0\0"


def from_storage_bytes(raw, spec: IOSpec) -> np.ndarray:
    """The bytes of an output buffer -> the host array. Kernels write a bool as the word 0
    or 1, so any other word (the poison of `Executor.poison`) is an element none wrote."""
    n = int(np.prod(spec.shape)) if spec.shape else 1
    arr = np.frombuffer(raw, _NP_STORAGE[spec.storage], count=n)
    if spec.storage == "bool":
        if (stray := np.flatnonzero(arr > 1)).size:
            i = int(stray[0])
            name = f" {spec.name}" if spec.name else ""
            raise PlanError(f"bool output{name} holds the word {int(arr[i]):#x} at "
                            f"element {i} ({stray.size} of {n} neither 0 nor 1): no kernel "
                            f"wrote it; this is a webpte bug, please report it")
        arr = arr != 0
    return arr.astype(spec.dtype).reshape(spec.shape)


def sample_inputs(plan, rng) -> list[np.ndarray]:
    """Inputs for timing a plan: standard normal floats, zero integers (valid ids, positions)."""
    return [rng.standard_normal(spec.shape).astype(spec.dtype) if spec.dtype.startswith("float")
            else np.zeros(spec.shape, spec.dtype) for spec in plan.inputs]
