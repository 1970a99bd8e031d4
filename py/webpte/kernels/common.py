"""Argument parsing shared by lowering and the numpy reference."""

from __future__ import annotations

from ..errors import PlanError, UnsupportedOpError
from ..pte.graph import Graph, SymIntValue, TensorValue, ValueList
from .schema import integral


class Args:
    """Typed views of an op's non-tensor arguments, with clear errors."""

    def __init__(self, graph: Graph, op_name: str = ""):
        self.graph = graph
        self.op_name = op_name

    def unsupported(self, call, why: str) -> UnsupportedOpError:
        """The error for a form of `call` that no kernel handles, saying why."""
        return UnsupportedOpError(f"{self.op_name}: {why}", [call.name])

    def _fail(self, vid: int, want: str):
        v = self.graph.values[vid]
        raise PlanError(f"{self.op_name}: value {vid} should be {want}, found "
                        f"{type(v).__name__} {v!r:.60}")

    def tensor(self, vid: int) -> TensorValue:
        v = self.graph.values[vid]
        if not isinstance(v, TensorValue):
            self._fail(vid, "a tensor")
        return v

    def is_null(self, vid: int) -> bool:
        return self.graph.values[vid] is None

    # Scalars are shared by Python equality (kernels/schema.py): an Int 2 may arrive as the
    # Double 2.0, a Bool as the Int 1, a Double as the Int 0.
    def int(self, vid: int) -> int:
        v = self.graph.values[vid]
        if not integral(v):
            self._fail(vid, "an Int")
        return int(v)

    def float(self, vid: int) -> float:
        v = self.graph.values[vid]
        if type(v) not in (int, float, bool):
            self._fail(vid, "a Double (or Int)")
        return float(v)

    def optional_float(self, vid: int) -> float | None:
        return None if self.is_null(vid) else self.float(vid)

    def bool(self, vid: int) -> bool:
        v = self.graph.values[vid]
        if type(v) in (bool, int, float) and v in (0, 1):
            return bool(v)
        self._fail(vid, "a Bool")

    def str(self, vid: int) -> str:
        v = self.graph.values[vid]
        if type(v) is not str:
            self._fail(vid, "a String")
        return v

    def ints(self, vid: int) -> tuple[int, ...]:
        v = self.graph.values[vid]
        if isinstance(v, tuple) and all(integral(x) for x in v):
            return tuple(int(x) for x in v)
        if integral(v):
            return (int(v),)
        self._fail(vid, "an IntList")

    def value_list(self, vid: int) -> tuple[int, ...]:
        v = self.graph.values[vid]
        if not isinstance(v, ValueList):
            self._fail(vid, "a ValueList")
        return v.ids

    def symint(self, vid: int) -> int:
        v = self.graph.values[vid]
        if not isinstance(v, SymIntValue):
            self._fail(vid, "a SymInt")
        return vid


def hinted_variant(features, hint: str, variants, default: str, what: str) -> str:
    """The kernel variant a planner hint among `features` names ("q8_decode:splitk"; the last
    in sorted order wins), else `default`; PlanError for a name not among `variants`."""
    names = [f[len(hint):] for f in sorted(features) if f.startswith(hint)]
    name = names[-1] if names else default
    if name not in variants:
        raise PlanError(f"{what} variant {name!r} is not one of {', '.join(variants)}")
    return name


def norm_dim(dim: int, rank: int, op: str = "") -> int:
    """A dim index in [0, rank), accepting negatives."""
    d = dim + rank if dim < 0 else dim
    if not 0 <= d < max(rank, 1):
        raise PlanError(f"{op}: dim {dim} out of range for rank {rank}")
    return d


def contiguous_strides(dims) -> list[int]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return strides


def grid_1d(n_threads: int, workgroup: int) -> tuple[tuple[int, int, int], int]:
    """Workgroup counts for n_threads on a 1-D index, folded into y past 65535.

    Returns (workgroups, row) where the flat index is gid.x + gid.y * row.
    """
    groups = max(1, -(-n_threads // workgroup))
    if groups <= 65535:
        return (groups, 1, 1), groups * workgroup
    x = 65535
    y = -(-groups // x)
    if y > 65535:
        raise PlanError(f"{n_threads} invocations exceed the 65535x65535 workgroup grid")
    return (x, y, 1), x * workgroup


def row_workgroup(length: int, elements_per_invocation: int, max_workgroup: int = 256) -> int:
    """Workgroup size (a power of two, 32..max) for one workgroup reducing one row."""
    want = -(-length // elements_per_invocation)
    wg = 32
    while wg < want and wg < max_workgroup:
        wg *= 2
    return wg
