"""The public Program API: load a .pte method, run it natively, inspect it.

Planning and `describe` import neither numpy nor wgpu: they also run in Pyodide.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ExternalDataError, InputError, PlanError, UnsupportedOpError, WebpteError
from .kernels.registry import missing_ops, registry
from .limits import resolve_limits
from .plan import Plan
from .planner import fused_graph, lower
from .planner.dynamic import specialize
from .planner.hints import resolve_hints
from .planner.method import edge_names, method_graph
from .pte import Graph, Method, PteProgram, open_source, read_program
from .pte.data_file import DataFile, read_data_file

# Host graph breaks: ops that would leave the device. Delegates and portable kernel calls alike
# run as webpte units in one plan, so a method keeps to it when every op has a unit.
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


def _data_files(data) -> tuple[list, list[DataFile]]:
    """The byte sources and keys of the external data files (`.ptd`) given as paths or bytes
    (one, or a list of them)."""
    if isinstance(data, (str, os.PathLike, bytes, bytearray, memoryview)):
        data = [data]
    sources, files = [], []
    for k, d in enumerate(data or (), 1):
        if not isinstance(d, (bytes, bytearray, memoryview)) and not Path(d).is_file():
            raise ExternalDataError(f"no data file at {d}; give the .ptd files written with "
                                    f"the program", file=str(d))
        src, path = _source(d)
        files.append(read_data_file(src, path or f"data file {k}"))
        sources.append(src)
    return sources, files


# `fusion` names -> `lower(fuse=...)`: every fusion, elementwise chains only, op by op.
FUSION = {"all": True, "elementwise": "elementwise", "none": False}


def plan_method(prog: PteProgram, method: str = "forward", features=(),
                fusion: str | None = None, input_shapes=None,
                limits: str | dict | None = None) -> Plan:
    """Lower one method of a parsed program to a Plan (no GPU needed).

    `features`: WGSL language features the target has (kernel variants depend on them) and
    planner hints, or `adapter_type:X` for the hints of that adapter type (planner/hints.py).
    `fusion`: "all", "elementwise" or "none"; None follows $WEBPTE_FUSE (default all).
    `input_shapes`: dims of each input for a method exported with dynamic (upper-bound)
    shapes; the graph is specialized to them (planner/dynamic.py).
    `limits`: "default" (WebGPU's default limits) or a dict of limits to plan within:
    weights past the binding limit are split (planner/split.py).
    """
    if fusion is not None and fusion not in FUSION:
        raise InputError(f"fusion {fusion!r} is not one of {', '.join(FUSION)}")
    features = resolve_hints(features)
    m = prog.method(method)
    if m.is_constant:
        raise PlanError(f"method {method!r} is a constant method (value {m.constant!r})")
    graph, input_ids, output_ids, state_ids = method_parts(m)
    if input_shapes is not None:
        if not any(io.dynamic for io in m.inputs):
            raise InputError(f"method {method!r} was exported with static shapes "
                             f"({_describe_io(m.inputs)})")
        graph = specialize(graph, input_ids, input_shapes)
    plan = lower(graph, method=method, input_ids=input_ids, output_ids=output_ids,
                 input_dtypes=[io.dtype for io in m.inputs],
                 output_dtypes=[io.dtype for io in m.outputs],
                 max_context=_constant(prog, "get_max_context_len"), features=features,
                 fuse=None if fusion is None else FUSION[fusion], state_ids=state_ids,
                 limits=resolve_limits(limits))
    if _position_input(plan) is not None and plan.outputs[0].dtype == "float32":
        # A windowed decoder: argmax / top-k of its logits on the device (host/sampling.py).
        from .kernels.sampling.topk import add_readouts

        add_readouts(plan, features=features)
    return plan


def method_parts(m: Method) -> tuple[Graph, list[int], list[int], list[int]]:
    """(graph, input ids, output ids, state ids) of a method as webpte plans and interprets
    it: the delegate's own graph for a method that is one VK00 delegate call, else the whole
    method as one graph (planner/method.py): every delegate and the kernel calls between them."""
    if _one_delegate(m):
        return m.graph, m.input_value_ids(), m.output_value_ids(), []
    if any(c.backend != "VulkanBackend" for c in m.delegate_calls):
        others = sorted({c.backend for c in m.delegate_calls} - {"VulkanBackend"})
        raise UnsupportedOpError(f"method {m.name!r} calls delegates of {', '.join(others)}; "
                                 f"webpte runs VulkanBackend delegates and portable kernels",
                                 [f"delegate:{b}" for b in others])
    mg = method_graph(m)
    return mg.graph, mg.input_ids, mg.output_ids, mg.state_ids


def _one_delegate(m: Method) -> bool:
    """One VulkanBackend delegate call and nothing else, which takes every method input,
    whose graph outputs are exactly the call's and the method's outputs, and in which no
    mutable buffer is written (the rest needs the method graph: an input nothing reads, an
    output that is an input)."""
    if len(m.delegate_calls) != 1 or m.kernel_calls or m.host_ops:
        return False
    call = m.delegate_calls[0]
    g = m.graphs.get(call.delegate_index)
    if g is None or len(call.args) != len(g.input_ids) + len(g.output_ids):
        return False
    n_in = len(g.input_ids)
    if (not {io.value_index for io in m.inputs} <= set(call.args[:n_in])
            or not {io.value_index for io in m.outputs} <= set(call.args[n_in:])):
        return False
    prepacked = {op.args[-1] for op in g.chain if op.name == "et_vk.prepack.default" and op.args}
    return not any(op.args and op.args[-1] in prepacked and op.name != "et_vk.prepack.default"
                   for op in g.chain)


def _constant(prog: PteProgram, name: str):
    m = prog.methods.get(name)
    return m.constant if m is not None and m.is_constant else None


class Program:
    """One method of a `.pte`, planned and loaded on the GPU.

    `run(*arrays)` takes the method's inputs in order and returns its outputs;
    state such as KV caches persists across calls until `reset()`.
    """

    def __init__(self, source, method: str = "forward", *, backend: str = "webgpu",
                 autotune: bool | None = None, poison: bool = False,
                 limits: str | dict | None = None, data=()):
        if backend not in BACKENDS:
            raise InputError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        self.data, self.path = _source(source)
        data_sources, data_files = _data_files(data)
        self.program = read_program(self.data, data_files)
        # What constants are read from: the .pte, then each data file (ConstantRef.file).
        self.sources = [self.data, *data_sources]
        self.method_name = method
        self.backend = backend
        self._poison = poison
        self.limits = cap = resolve_limits(limits)
        if backend == "webgpu":
            from .autotune import ENV, tuned_features
            from .native import Executor, wgsl_features
            from .native.device import device_limits
            from .preflight import check_plan

            features = wgsl_features()
            if autotune is None:
                autotune = os.environ.get(ENV, "") not in ("", "0")
            if autotune:   # a measured decode variant (webpte/autotune.py)
                features = tuned_features(self.program, self.sources, method, features,
                                          plan_method=plan_method)
            self.features = features
            self.plan = plan_method(self.program, method, features, limits=cap)
            # AdapterLimitsError before any buffer is made
            check_plan(self.plan, None if cap is None else device_limits(cap))
            self.executor = Executor(self.plan, self.sources, cap)
            if poison:
                self.executor.poison()
        else:
            from .kernels.reference import ReferenceExecutor

            self.plan = plan_method(self.program, method, limits=cap)
            graph, ins, outs, state = method_parts(self.program.method(method))
            # The graph the plan lowers (fused nodes run as the nodes they fused, in place).
            graph = fused_graph(graph, ins, outs, state, features=resolve_hints(()),
                                limits=resolve_limits(cap))
            self.executor = ReferenceExecutor(self.plan, graph, ins, outs, self.sources, state)
        self._positions = _position_input(self.plan)
        self._dynamic = any(io.dynamic for io in self.program.method(method).inputs)
        self._specialized: dict[tuple, object] = {}

    def _executor_for(self, arrays):
        """The executor for these inputs' dims: the exported plan's, or (for a method with
        dynamic shapes) one planned for them, made once per distinct dims."""
        import numpy as np

        shapes = tuple(tuple(np.shape(a)) for a in arrays)
        if not self._dynamic or shapes == tuple(tuple(s.shape) for s in self.plan.inputs):
            return self.executor
        if self.plan.state:
            raise InputError("calls with other input dims are not supported for programs with "
                             "persistent state (KV caches)")
        if shapes not in self._specialized:
            if self.backend == "webgpu":
                from .native import Executor

                plan = plan_method(self.program, self.method_name, self.features,
                                   input_shapes=shapes, limits=self.limits)
                self._specialized[shapes] = Executor(plan, self.sources, self.limits)
                if self._poison:
                    self._specialized[shapes].poison()
            else:
                from .kernels.reference import ReferenceExecutor

                plan = plan_method(self.program, self.method_name, input_shapes=shapes)
                graph, ins, outs, state = method_parts(self.program.method(self.method_name))
                graph = fused_graph(specialize(graph, ins, shapes), ins, outs, state,
                                    features=resolve_hints(()), limits=resolve_limits(self.limits))
                self._specialized[shapes] = ReferenceExecutor(plan, graph, ins, outs,
                                                              self.sources, state)
        return self._specialized[shapes]

    @property
    def graph(self) -> Graph:
        """The graph the plan runs (the delegate's, or the whole method's)."""
        return method_parts(self.program.method(self.method_name))[0]

    def run(self, *arrays) -> list:
        """Run one call. Inputs are checked (count, shape, dtype, context) before the GPU."""
        if len(arrays) != len(self.plan.inputs):
            raise InputError(f"{self.method_name} takes {len(self.plan.inputs)} inputs "
                             f"({_describe(self.plan.inputs)}), got {len(arrays)}")
        executor = self._executor_for(arrays)
        self._check_context(arrays)
        return executor.run(list(arrays))

    def run_calls(self, calls, readout: int | None = None):
        """Run several calls in order (a prompt's windows) in one GPU submit; returns what
        `run` gives for the last one, or (readout=k, one of `readouts`) the uint32 words of
        the device's best k token ids and their logits (host.sampling.Candidates)."""
        calls = [list(c) for c in calls]
        if not calls:
            raise InputError("run_calls needs at least one call")
        for arrays in calls:
            if len(arrays) != len(self.plan.inputs):
                raise InputError(f"{self.method_name} takes {len(self.plan.inputs)} inputs "
                                 f"({_describe(self.plan.inputs)}), got {len(arrays)}")
            self._check_context(arrays)
        if self.backend == "webgpu" and self._executor_for(calls[0]) is self.executor:
            return self.executor.run_calls(calls, readout)
        if readout is not None and readout not in self.readouts:
            raise InputError(f"the plan has readouts for k in {self.readouts}, not {readout}")
        for arrays in calls:
            outs = self._executor_for(arrays).run(arrays)
        if readout is None:
            return outs
        from .kernels.sampling.topk import readout_words

        return readout_words(outs[0], readout)

    @property
    def readouts(self) -> list[int]:
        """The k of the plan's device readouts of the logits (empty: not a decoder)."""
        return [r.k for r in self.plan.readouts]

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


def _describe_io(ios) -> str:
    return ", ".join(f"{io.dtype}{list(io.shape or [])}" for io in ios)


def load(path, method: str = "forward", *, backend: str = "webgpu",
         autotune: bool | None = None, poison: bool = False,
         limits: str | dict | None = None, data=()) -> Program:
    """Load `method` of the `.pte` at `path` (or bytes) onto the default WebGPU device (or
    the numpy reference interpreter: `backend="reference"`). `autotune` (default: the
    WEBPTE_AUTOTUNE environment variable) measures the decode kernel variants on this
    adapter once per program and plans the fastest (webpte/autotune.py). `poison` (tests)
    fills the GPU's activation and output buffers with a NaN pattern at load, so an element
    no kernel writes reads as that NaN (a bool one fails the read); the numpy interpreter
    writes every element and ignores it. `limits`: "default" plans for and creates the device
    with WebGPU's default limits (weights past a binding are split), a dict caps some limits
    (plan.validate.DEFAULT_LIMITS names); None: the adapter's own. `data`: the external data
    files (`.ptd`, paths or bytes) the program keeps constants in; a constant none of them
    holds is an ExternalDataError naming its key."""
    return Program(path, method, backend=backend, autotune=autotune, poison=poison,
                   limits=limits, data=data)


def describe(prog: PteProgram, plans: dict[str, Plan] | None = None,
             path: str | None = None) -> dict:
    """A JSON-able description of a program: methods, memory, ops, policy."""
    plans = dict(plans or {})
    out: dict = {"file": path, "bytes": prog.file_size, "methods": {}, "constant_methods": {}}
    if prog.data_files:
        out["data_files"] = [{"file": f.name, "bytes": f.size, "keys": len(f.entries)}
                             for f in prog.data_files]
    all_ok = True
    for name, m in prog.methods.items():
        if m.is_constant:
            out["constant_methods"][name] = m.constant
            continue
        info: dict = {
            "inputs": [io.as_dict() for io in m.inputs],
            "outputs": [io.as_dict() for io in m.outputs],
            "delegates": [c.backend for c in m.delegate_calls],
        }
        info["delegate_calls"] = len(m.delegate_calls)
        info["host_kernel_calls"] = len(m.kernel_calls)
        calls: dict[str, int] = {}
        for k in m.kernel_calls:
            calls[k.name] = calls.get(k.name, 0) + 1
        info["kernel_call_histogram"] = dict(sorted(calls.items()))
        vk_ops: list[str] = []
        for g in m.graphs.values():
            vk_ops += [op.name for op in g.chain]
        hist: dict[str, int] = {}
        for n in vk_ops:
            hist[n] = hist.get(n, 0) + 1
        info["op_histogram"] = dict(sorted(hist.items()))
        try:
            # Kernel calls run as webpte units too: missing ones are what the method lacks.
            ops = [op.name for op in method_parts(m)[0].chain]
        except WebpteError as e:
            ops, info["plan_error"] = vk_ops + list(m.host_ops), str(e)
        info["unsupported_ops"] = missing_ops(ops)
        # What would leave the device: kernel calls (and foreign delegates) without a unit.
        info["host_graph_breaks"] = [h for h in m.host_ops if h.startswith("delegate:")
                                     or not any(n in registry() for n in edge_names(h))]
        plan = plans.get(name)
        if plan is None and not info["unsupported_ops"] and "plan_error" not in info:
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
        # Every delegate and every kernel call between them run in the one plan on the device.
        keeps = plan is not None
        info["runs_on"] = ("device: one plan (all delegates and kernel calls)" if keeps
                           else "not runnable: see unsupported_ops / plan_error")
        info["policy"] = {"rule": POLICY, "ok": keeps}
        all_ok &= keeps
        out["methods"][name] = info
    out["policy"] = {"rule": POLICY, "ok": all_ok}
    return out


def inspect(path: str | os.PathLike, data=()) -> dict:
    """Describe a `.pte` (with its external data files, `data`) without a GPU (plans are
    made, nothing is uploaded)."""
    source, p = _source(path)
    return describe(read_program(source, _data_files(data)[1]), path=p)
