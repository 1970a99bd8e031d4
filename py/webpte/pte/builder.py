"""Build VK00-style graphs in memory (op conformance tests, experiments).

Constants live in one in-memory blob; `GraphBuilder.build()` returns the Graph and
that blob, which stands in for the file bytes everywhere a .pte's bytes go.
"""

from __future__ import annotations

import numpy as np

from .graph import ConstantRef, DType, Graph, OpCall, SymIntValue, TensorValue, ValueList

_DTYPES = {np.dtype(np.float32): DType.FLOAT32, np.dtype(np.int32): DType.INT32,
           np.dtype(np.int64): DType.INT64, np.dtype(np.int8): DType.INT8,
           np.dtype(np.uint8): DType.UINT8, np.dtype(np.bool_): DType.BOOL}


class GraphBuilder:
    def __init__(self):
        self.values: list = []
        self.chain: list[OpCall] = []
        self.constants: list[ConstantRef] = []
        self.blob = bytearray()

    def _add(self, v) -> int:
        self.values.append(v)
        return len(self.values) - 1

    def tensor(self, dtype, dims) -> int:
        """A runtime tensor (input, activation or output)."""
        dt = dtype if isinstance(dtype, DType) else _DTYPES[np.dtype(dtype)]
        return self._add(TensorValue(dt, tuple(int(d) for d in dims), -1, -1))

    def constant(self, array: np.ndarray, dtype=None) -> int:
        """A constant tensor; int64 data is stored narrowed to int32 like the exporter does."""
        array = np.asarray(array)
        dt = dtype if isinstance(dtype, DType) else _DTYPES[array.dtype]
        raw = (array.astype(np.int32) if dt == DType.INT64 else array).tobytes()
        while len(self.blob) % 16:
            self.blob.append(0)
        ref = ConstantRef(len(self.blob), len(raw), None)
        self.blob += raw
        self.constants.append(ref)
        return self._add(TensorValue(dt, tuple(array.shape), len(self.constants) - 1, -1))

    def scalar(self, v) -> int:
        if isinstance(v, list):
            v = tuple(v)
        return self._add(v)

    def value_list(self, ids) -> int:
        return self._add(ValueList(tuple(ids)))

    def symint(self) -> int:
        return self._add(SymIntValue(0))

    def op(self, name: str, *args: int) -> None:
        self.chain.append(OpCall(name, tuple(args), len(self.chain)))

    def build(self, inputs, outputs) -> tuple[Graph, bytes]:
        g = Graph(values=list(self.values), chain=list(self.chain), input_ids=list(inputs),
                  output_ids=list(outputs), constants=list(self.constants))
        return g, bytes(self.blob)
