"""What the page's worker (web/worker.js) calls in Pyodide: read a program from byte ranges
the worker serves on demand and plan one method. Imports neither numpy nor wgpu.

The file stays in a JS ArrayBuffer; Python only asks for the ranges the reader needs (the
flatbuffer regions), so the weights never enter the wasm heap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from .errors import InputError, WebpteError
from .program import _position_input, plan_method
from .pte import read_program

__all__ = ["RangeSource", "plan_program"]


class RangeSource:
    """A byte source of `size` bytes that supports `len()` and slicing, backed by
    `read(start, stop)` (in the page: a JS function returning a Uint8Array view).

    Counts the bytes it hands out (`bytes_read`), which shows what crossed into Python.
    """

    def __init__(self, size: int, read: Callable[[int, int], object]):
        self.size = int(size)
        self._read = read
        self.bytes_read = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                raise ValueError("RangeSource slices take step 1")
            if stop <= start:
                return b""
            raw = self._read(start, stop)
            raw = raw.to_bytes() if hasattr(raw, "to_py") else bytes(raw)  # a JsProxy
            self.bytes_read += len(raw)
            return raw
        index = range(self.size)[key]
        return self[index:index + 1][0]


def plan_program(source, method: str = "forward", features=()) -> str:
    """Plan `method` of the program in `source` (bytes or a `RangeSource`) for a device with
    the WGSL language `features` (in the page: `navigator.gpu.wgslLanguageFeatures`).

    Returns JSON: `{"plan": Plan, "position_input": [input index, rows] | null,
    "bytes_read": int, "plan_ms": float}`, or `{"error": {"name", "message", "ops"}}` for a
    webpte error (the worker raises it as the JS error class of the same name).
    """
    t0 = time.perf_counter()
    try:
        prog = read_program(source)
        if method not in prog.methods:
            raise InputError(f"the program has no method {method!r}; it has "
                             f"{sorted(prog.methods)}")
        plan = plan_method(prog, method, frozenset(str(f) for f in features))
    except WebpteError as e:
        return json.dumps({"error": {"name": type(e).__name__, "message": str(e),
                                     "ops": list(getattr(e, "ops", []))}})
    plan_ms = (time.perf_counter() - t0) * 1e3
    pos = _position_input(plan)
    return ('{"plan":' + plan.to_json()
            + f',"position_input":{json.dumps(list(pos) if pos else None)}'
            + f',"bytes_read":{getattr(source, "bytes_read", len(source))}'
            + f',"plan_ms":{plan_ms:.3f}}}')
