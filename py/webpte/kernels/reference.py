"""The numpy interpreter of a VK00 graph: the living spec and the test oracle.

Arrays carry the GPU storage dtype (int64 values are narrowed to int32 as on the
GPU), so the reference does the same arithmetic the kernels do.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, PlanError, UnsupportedOpError
from ..pte.data_file import file_source
from ..pte.graph import DType, Graph, SymIntValue, TensorValue
from .common import Args
from .registry import check_graph_args, missing_ops, registry
from .storage import storage_of

NUMPY_OF_STORAGE = {"f32": np.float32, "i32": np.int32, "i8": np.int8, "u8": np.uint8,
                    "bool": np.bool_}
_FILE_DTYPE = {DType.FLOAT32: np.float32, DType.INT32: np.int32, DType.INT64: np.int32,
               DType.INT8: np.int8, DType.UINT8: np.uint8, DType.BOOL: np.bool_}


class RefEnv:
    """Values of one reference run; `state` persists across runs (KV caches)."""

    def __init__(self, graph: Graph, data, state: dict[int, np.ndarray] | None = None,
                 constants: dict[int, np.ndarray] | None = None):
        self.graph = graph
        self.data = data
        self.args = Args(graph)
        self.values: dict[int, np.ndarray] = {}
        self.scalars: dict[int, int] = {}
        self.state = {} if state is None else state
        self._const_cache: dict[int, np.ndarray] = {} if constants is None else constants

    def get(self, vid: int) -> np.ndarray:
        if vid in self.state:
            return self.state[vid]
        if vid in self.values:
            return self.values[vid]
        t = self.args.tensor(vid)
        if t.is_constant:
            if vid not in self._const_cache:
                self._const_cache[vid] = load_constant(self.graph, self.data, t)
            return self._const_cache[vid]
        raise PlanError(f"reference: value {vid} is read before it is written")

    def set(self, vid: int, arr) -> None:
        t = self.args.tensor(vid)
        arr = np.asarray(arr)
        if tuple(arr.shape) != tuple(t.dims):
            raise PlanError(f"reference: value {vid} has shape {arr.shape}, graph says {t.dims}")
        arr = arr.astype(NUMPY_OF_STORAGE[storage_of(t)], copy=False)
        if vid in self.state:  # an op writing a mutable buffer (KV cache) of the method
            self.state[vid] = arr
        else:
            self.values[vid] = arr

    def persistent(self, vid: int) -> np.ndarray:
        """A state array of its own for `vid` (a KV cache), zero at first use."""
        if vid not in self.state:
            t = self.args.tensor(vid)
            self.state[vid] = np.zeros(t.dims, NUMPY_OF_STORAGE[storage_of(t)])
        return self.state[vid]

    def set_scalar(self, vid: int, value: int) -> None:
        if not isinstance(self.graph.values[vid], SymIntValue):
            raise PlanError(f"reference: value {vid} is not a SymInt")
        self.scalars[vid] = int(value)

    def scalar(self, vid: int) -> int:
        if vid not in self.scalars:
            raise PlanError(f"reference: SymInt {vid} is read before it is written")
        return self.scalars[vid]


def load_constant(graph: Graph, data, t: TensorValue) -> np.ndarray:
    ref = graph.constants[t.constant_id]
    dtype = _FILE_DTYPE.get(t.dtype)
    if dtype is None:
        raise PlanError(f"reference: constants of dtype {t.dtype.name} are not supported")
    if ref.nbytes == 0:
        return np.zeros(t.dims, dtype)
    n = t.numel * np.dtype(dtype).itemsize
    src = file_source(data, ref.file, "reference")
    raw = b"".join(bytes(src[o: o + k]) for o, k in ref.ranges())[:n]
    return np.frombuffer(raw, dtype).reshape(t.dims)


def run_reference(graph: Graph, inputs: dict[int, np.ndarray], data,
                  state: dict[int, np.ndarray] | None = None,
                  constants: dict[int, np.ndarray] | None = None) -> RefEnv:
    """Interpret the graph with numpy. `inputs` maps graph input value ids to arrays;
    `state` (KV caches) persists across calls, `constants` caches decoded constants."""
    missing = missing_ops(op.name for _, op in graph.unfused())
    if missing:
        raise UnsupportedOpError(f"no reference for op(s): {', '.join(missing)}", missing)
    check_graph_args(graph)
    env = RefEnv(graph, data, state, constants)
    for vid in graph.input_ids:
        if vid not in inputs:
            raise InputError(f"reference: graph input {vid} not given")
        env.set(vid, inputs[vid])
    reg = registry()
    for node, op in graph.unfused():   # a fused node runs as the ops it fused, in order
        env.args.op_name = f"{op.name} (node {node})"
        reg[op.name].reference(env, op)
    return env


class ReferenceExecutor:
    """One planned method run by this interpreter instead of a GPU, with the same `run()` /
    `reset()` as `webpte.native.Executor`: inputs are checked and narrowed exactly as they are
    for the GPU, state (KV caches) persists until `reset()`. Slow; the oracle of end-to-end
    tests and a way to run a program where no adapter exists."""

    def __init__(self, plan, graph: Graph, input_ids, output_ids, data, state_ids=()):
        self.plan = plan
        self.graph = graph
        self.input_ids = list(input_ids)
        self.output_ids = list(output_ids)
        self.data = data
        # Values the graph's ops write and read across calls (zero at load and reset).
        self.state_ids = list(state_ids)
        self.state: dict[int, np.ndarray] = {}
        self.reset()
        self.constants: dict[int, np.ndarray] = {}

    def run(self, arrays) -> list[np.ndarray]:
        from ..plan.io import from_storage_bytes, to_storage_bytes

        if len(arrays) != len(self.plan.inputs):
            raise InputError(f"the method takes {len(self.plan.inputs)} inputs, got "
                             f"{len(arrays)}")
        inputs = {vid: from_storage_bytes(to_storage_bytes(a, spec, f"input {i}"), spec)
                  for i, (vid, a, spec) in enumerate(zip(self.input_ids, arrays,
                                                         self.plan.inputs))}
        env = run_reference(self.graph, inputs, self.data, self.state, self.constants)
        return [np.array(env.get(vid)).astype(spec.dtype).reshape(spec.shape)
                for vid, spec in zip(self.output_ids, self.plan.outputs)]

    def reset(self) -> None:
        """Forget the persistent state (KV caches start from zero again)."""
        self.state.clear()
        for vid in self.state_ids:
            t = self.graph.values[vid]
            self.state[vid] = np.zeros(t.dims, NUMPY_OF_STORAGE[storage_of(t)])
