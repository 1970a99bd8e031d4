"""The public Program API: load a .pte method, run it natively, inspect it.

Planning and `describe` import neither numpy nor wgpu: they also run in Pyodide.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError, PlanError, UnsupportedOpError, WebpteError
from .kernels.registry import missing_ops
from .plan import Plan, lower
from .pte import PteProgram, open_source, read_program

POLICY = "one delegate per method, no host graph breaks"
# webgpu: the plan on the wgpu-py device; reference: webpte's numpy interpreter (CPU, slow).
BACKENDS = ("webgpu", "reference")


def _source(path_or_bytes):
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return path_or_bytes, None
    path = Path(path_or_bytes)
    if not path.is_file():
        raise FileNotFoundError(f"no program file at {path}")
    return open_source(path), str(path)


# `fusion` names -> `lower(fuse=...)`: every fusion, elementwise chains only, op by op.
FUSION = {"all": True, "elementwise": "elementwise", "none": False}


def plan_method(prog: PteProgram, method: str = "forward", features=(),
                fusion: str | None = None) -> Plan:
    """Lower one method of a parsed program to a Plan (no GPU needed).

    `features`: WGSL language features the target has (kernel variants depend on them).
    `fusion`: "all", "elementwise" or "none"; None follows $WEBPTE_FUSE (default all).
    """
    if fusion is not None and fusion not in FUSION:
        raise InputError(f"fusion {fusion!r} is not one of {', '.join(FUSION)}")
    m = prog.method(method)
    if m.is_constant:
        raise PlanError(f"method {method!r} is a constant method (value {m.constant!r})")
    if m.host_ops:
        raise UnsupportedOpError(
            f"method {method!r} has host graph breaks ({', '.join(m.host_ops)}); webpte runs "
            f"programs that keep to '{POLICY}'", m.host_ops)
    graph = m.graph
    return lower(graph, method=method, input_ids=m.input_value_ids(),
                 output_ids=m.output_value_ids(),
                 input_dtypes=[io.dtype for io in m.inputs],
                 output_dtypes=[io.dtype for io in m.outputs],
                 max_context=_constant(prog, "get_max_context_len"), features=features,
                 fuse=None if fusion is None else FUSION[fusion])


def _constant(prog: PteProgram, name: str):
    m = prog.methods.get(name)
    return m.constant if m is not None and m.is_constant else None


class Program:
    """One method of a `.pte`, planned and loaded on the GPU.

    `run(*arrays)` takes the method's inputs in order and returns its outputs;
    state such as KV caches persists across calls until `reset()`.
    """

    def __init__(self, source, method: str = "forward", *, backend: str = "webgpu"):
        if backend not in BACKENDS:
            raise InputError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        self.data, self.path = _source(source)
        self.program = read_program(self.data)
        self.method_name = method
        self.backend = backend
        if backend == "webgpu":
            from .native import Executor, wgsl_features

            self.plan = plan_method(self.program, method, wgsl_features())
            self.executor = Executor(self.plan, self.data)
        else:
            from .kernels.reference import ReferenceExecutor

            self.plan = plan_method(self.program, method)
            m = self.program.method(method)
            self.executor = ReferenceExecutor(self.plan, m.graph, m.input_value_ids(),
                                              m.output_value_ids(), self.data)
        self._positions = _position_input(self.plan)

    @property
    def graph(self):
        return self.program.method(self.method_name).graph

    def run(self, *arrays) -> list:
        """Run one call. Inputs are checked (count, shape, dtype, context) before the GPU."""
        if len(arrays) != len(self.plan.inputs):
            raise InputError(f"{self.method_name} takes {len(self.plan.inputs)} inputs "
                             f"({_describe(self.plan.inputs)}), got {len(arrays)}")
        self._check_context(arrays)
        return self.executor.run(list(arrays))

    def _check_context(self, arrays) -> None:
        import numpy as np

        if self._positions is None or self.plan.max_context is None:
            return
        pos_i, rows = self._positions
        pos = np.asarray(arrays[pos_i]).reshape(-1)
        if pos.size != 1:
            raise InputError(f"input {pos_i} (input_pos) must hold one position")
        p = int(pos[0])
        if p < 0 or p + rows > self.plan.max_context:
            raise InputError(f"input_pos {p} + {rows} rows exceeds the context of "
                             f"{self.plan.max_context} positions; start a new conversation "
                             f"(reset) or shorten the prompt")

    def reset(self) -> None:
        """Zero persistent state (KV caches)."""
        self.executor.reset()

    def manifest(self) -> dict:
        """The same description `webpte inspect` prints, for this program."""
        return describe(self.program, plans={self.method_name: self.plan}, path=self.path)


def _position_input(plan: Plan):
    """(index of the input_pos input, rows per call) for windowed decoders, else None."""
    ints = [i for i, s in enumerate(plan.inputs)
            if s.dtype in ("int64", "int32") and tuple(s.shape) == (1,)]
    floats = [s for s in plan.inputs if s.dtype == "float32" and len(s.shape) >= 2]
    if len(ints) != 1 or not floats:
        return None
    return ints[0], int(floats[0].shape[1])


def _describe(specs) -> str:
    return ", ".join(f"{s.dtype}{list(s.shape)}" for s in specs)


def load(path, method: str = "forward", *, backend: str = "webgpu") -> Program:
    """Load `method` of the `.pte` at `path` (or bytes) onto the default WebGPU device (or
    the numpy reference interpreter: `backend="reference"`)."""
    return Program(path, method, backend=backend)


def describe(prog: PteProgram, plans: dict[str, Plan] | None = None,
             path: str | None = None) -> dict:
    """A JSON-able description of a program: methods, memory, ops, policy."""
    plans = dict(plans or {})
    out: dict = {"file": path, "bytes": prog.file_size, "methods": {}, "constant_methods": {}}
    all_ok = True
    for name, m in prog.methods.items():
        if m.is_constant:
            out["constant_methods"][name] = m.constant
            continue
        info: dict = {
            "inputs": [io.as_dict() for io in m.inputs],
            "outputs": [io.as_dict() for io in m.outputs],
            "delegates": [c.backend for c in m.delegate_calls],
            "host_graph_breaks": list(m.host_ops),
        }
        vk_ops: list[str] = []
        for g in m.graphs.values():
            vk_ops += [op.name for op in g.chain]
        hist: dict[str, int] = {}
        for n in vk_ops:
            hist[n] = hist.get(n, 0) + 1
        info["op_histogram"] = dict(sorted(hist.items()))
        info["unsupported_ops"] = missing_ops(vk_ops)
        plan = plans.get(name)
        if plan is None and not info["unsupported_ops"] and not m.host_ops:
            try:
                plan = plan_method(prog, name)
            except WebpteError as e:
                info["plan_error"] = str(e)
        if plan is not None:
            info["dispatches"] = len(plan.dispatches)
            info["kernels"] = len(plan.kernels)
            mem = plan.memory()
            info["device_memory_bytes"] = {
                "weights": mem.get("constant", 0),
                "activations": mem.get("activation", 0) + mem.get("input", 0)
                + mem.get("output", 0) + mem.get("scalar", 0),
                "state": mem.get("state", 0),
                "total": mem["total"],
            }
            info["limits_needed"] = plan.limits
        keeps = len(m.delegate_calls) == 1 and not m.host_ops
        info["policy"] = {"rule": POLICY, "ok": keeps}
        all_ok &= keeps
        out["methods"][name] = info
    out["policy"] = {"rule": POLICY, "ok": all_ok}
    return out


def inspect(path: str | os.PathLike) -> dict:
    """Describe a `.pte` without a GPU (plans are made, nothing is uploaded)."""
    data, p = _source(path)
    return describe(read_program(data), path=p)
