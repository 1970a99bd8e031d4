"""The in-memory form of a VK00 graph: values, op chain, constant byte ranges."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class DType(IntEnum):
    """VK00 tensor datatypes (the enum values are the serialized ones)."""

    BOOL = 0
    UINT8 = 1
    INT8 = 2
    INT32 = 3
    FLOAT16 = 4
    FLOAT32 = 5
    FLOAT64 = 6
    INT64 = 7

    @property
    def itemsize(self) -> int:
        return {0: 1, 1: 1, 2: 1, 3: 4, 4: 2, 5: 4, 6: 8, 7: 8}[int(self)]

    @property
    def numpy_name(self) -> str:
        return {0: "bool", 1: "uint8", 2: "int8", 3: "int32", 4: "float16",
                5: "float32", 6: "float64", 7: "int64"}[int(self)]


@dataclass(frozen=True)
class TensorValue:
    dtype: DType
    dims: tuple[int, ...]
    constant_id: int = -1
    mem_obj_id: int = -1

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def is_constant(self) -> bool:
        return self.constant_id >= 0


@dataclass(frozen=True)
class ValueList:
    """A list of value ids (multi-output ops, tensor lists)."""

    ids: tuple[int, ...]


@dataclass(frozen=True)
class SymIntValue:
    """A symbolic int computed at run time (its serialized value is a placeholder)."""

    value: int = 0


# A graph value is one of: None (Null), int, float, bool, str, TensorValue,
# tuple[int|float|bool, ...] (Int/Double/Bool lists), ValueList, SymIntValue.
Value = object


@dataclass(frozen=True)
class OpCall:
    name: str
    args: tuple[int, ...]
    node_id: int = 0


@dataclass(frozen=True)
class ConstantRef:
    """Where a constant's bytes live: an absolute byte range of file `file` (0: the .pte,
    k: the k-th external data file the program was loaded with); with `pieces` > 1, that
    many runs of nbytes / pieces bytes, run i at offset + i * stride, back to back (a column
    block of a row-major matrix: planner/split.py)."""

    offset: int
    nbytes: int
    key: str | None = None
    file: int = 0
    pieces: int = 1
    stride: int = 0

    def ranges(self) -> list[tuple[int, int]]:
        """(offset, nbytes) of each run of the file, in order."""
        if self.pieces == 1:
            return [(self.offset, self.nbytes)]
        run = self.nbytes // self.pieces
        return [(self.offset + i * self.stride, run) for i in range(self.pieces)]


@dataclass
class Graph:
    """A VK00 graph. Constants are byte ranges of the files, never loaded here."""

    values: list[Value]
    chain: list[OpCall]
    input_ids: list[int]
    output_ids: list[int]
    constants: list[ConstantRef] = field(default_factory=list)

    def tensor(self, vid: int) -> TensorValue:
        v = self.values[vid]
        if not isinstance(v, TensorValue):
            raise TypeError(f"value {vid} is {type(v).__name__}, not a tensor")
        return v

    # Planner passes (webpte/planner/passes.py) replace nodes by fused ones and keep the
    # nodes as the reader made them: `nodes` is that chain (node n of a plan is nodes[n]),
    # `unfused()` the chain with each fused node's own nodes in its place.
    @property
    def nodes(self) -> list[OpCall]:
        return self.chain

    def node(self, n: int) -> OpCall:
        return self.nodes[n]

    def unfused(self):
        """(node index, op) of every op the chain computes, in the order it computes them."""
        return enumerate(self.chain)

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for op in self.chain:
            hist[op.name] = hist.get(op.name, 0) + 1
        return dict(sorted(hist.items()))
