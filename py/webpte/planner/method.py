"""A whole method as one Graph: every delegate of the instruction chain inlined, and the
non-delegated kernel calls between them as ops of webpte's own units.

ExecuTorch runs the kernel calls of a partially delegated method on the CPU between the
delegates; webpte runs them with its own kernels, so the method is one plan on the device.
The execution plan's values become graph values with the same ids; each delegate graph's
values are appended after them, its inputs and outputs replaced by the method values the
delegate call passes, its constants appended to the method's. A kernel call
`aten::add.Scalar_out` becomes an op `aten.add.Scalar` (the edge op it came from) with the
same arguments, the out tensor last.

Mutable buffers (KV caches) are the values that persist across calls: planned tensors of the
execution plan that an instruction reads before any instruction writes them, and, in a
delegate built with `alias_buffer_mutations`, prepacked constants that a later op of the
delegate writes again. They become state (zero at load and at reset; ExecuTorch exports
these buffers zero-initialised); their one-time prepack is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PlanError, PteFormatError, UnsupportedOpError
from ..kernels.registry import schemas
from ..kernels.schema import check_call, integral
from ..pte.graph import ConstantRef, DType, Graph, OpCall, TensorValue, ValueList
from ..pte.reader import Method, ProgramTensor, ValueRefs
from .aliasing import Slot, resolve_aliases

_DTYPES = {"bool": DType.BOOL, "uint8": DType.UINT8, "int8": DType.INT8, "int32": DType.INT32,
           "float16": DType.FLOAT16, "float32": DType.FLOAT32, "float64": DType.FLOAT64,
           "int64": DType.INT64}
# ExecuTorch's element sizes (int64 is 8 bytes in its arenas, whatever webpte stores).
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int32": 4, "float16": 2, "float32": 4,
             "float64": 8, "int64": 8}
_PREPACK = "et_vk.prepack.default"
_COPY = "aten.copy_.default"


@dataclass
class MethodGraph:
    graph: Graph
    input_ids: list[int]
    output_ids: list[int]
    state_ids: list[int]
    delegates: int
    host_calls: int


def edge_names(kernel: str) -> list[str]:
    """Edge ops a portable kernel call may run, most likely first: `aten::add.Scalar_out`
    -> `aten.add.Scalar`; `aten::mul.out` -> `aten.mul.Tensor` (or `.default`, ...);
    `aten::sum.IntList_out` -> `aten.sum.dim_IntList`; `aten::div.out_mode` ->
    `aten.div.Tensor_mode`; `aten::copy_` -> `aten.copy_.default`."""
    base, _, overload = kernel.partition(".")
    base = base.replace("::", ".")
    if overload == "":
        names = ["default"]
    elif overload == "out":
        names = ["default", "Tensor", "dim", "int", "self"]
    elif overload == "all_out":
        names = ["default"]
    elif overload.endswith("_out"):
        names = [overload[:-4], f"dim_{overload[:-4]}"]
    elif overload.startswith("out_"):
        names = [f"Tensor_{overload[4:]}"]  # `aten::div.out_mode` -> `aten.div.Tensor_mode`
    else:
        # Named out overloads: `aten::max.dim_max` (values, indices) -> `aten.max.dim`.
        names = [overload] + ([overload.rsplit("_", 1)[0]] if "_" in overload else [])
    # Last: the out variant itself, for units of forms no edge op has (scalar_tensor.out).
    return [f"{base}.{n}" for n in names] + ([f"{base}.{overload}"] if overload else [])


def _edge_op(kernel: str, graph_values: list, args: tuple[int, ...], node: int) -> OpCall:
    """The first candidate edge op whose unit's schema accepts the call's arguments."""
    names = edge_names(kernel)
    table = schemas()
    probe = Graph(values=graph_values, chain=[], input_ids=[], output_ids=[])
    # The call's own arguments, or its outs as one list (the edge op's multi-output form).
    forms = list(dict.fromkeys([args, _one_output_list(graph_values, args)]))
    for name in names:
        for form in forms if name in table else ():
            call = OpCall(name, form, node)
            try:
                check_call(probe, node, call, table[name])
            except PlanError:
                continue
            return call
    return OpCall(names[0], forms[-1], node)


def _one_output_list(values: list, args: tuple[int, ...]) -> tuple[int, ...]:
    """A multi-output kernel call passes its out tensors and then the returned TensorList of
    the same tensors (`native_layer_norm.out(..., out0, out1, out2) -> [out0, out1, out2]`);
    the edge op's form is the list alone, last."""
    if not args or not isinstance(values[args[-1]], ValueList):
        return args
    ids = values[args[-1]].ids
    if len(args) >= 2 and isinstance(values[args[-2]], ValueList) and values[args[-2]].ids == ids:
        return args[:-1]  # `split_copy.Tensor_out(..., out) -> out`: the list passed twice
    k = len(ids)
    if k and len(args) > k and tuple(args[-1 - k:-1]) == ids:
        return args[:-1 - k] + (args[-1],)
    return args


def method_graph(m: Method) -> MethodGraph:
    """The method as one Graph (see the module docstring)."""
    b = _Builder(m)
    for kind, i in m.instructions:
        if kind == "delegate":
            b.delegate(i)
        else:
            args = m.kernel_calls[i].args
            # An out variant's args end with `out` and then the returned value, the same
            # tensor again: keep one.
            if len(args) >= 2 and args[-1] == args[-2]:
                args = args[:-1]
            b.chain.append(_edge_op(m.kernel_calls[i].name, b.values, args, len(b.chain)))
    inputs = [io.value_index for io in m.inputs]
    b.chain, outputs = resolve_aliases(b.values, b.chain, inputs,
                                       [io.value_index for io in m.outputs], b.slots, m.name)
    state = b.state_ids() - set(inputs)
    chain = [op for op in b.chain if not (op.name == _PREPACK and op.args[-1] in state)]
    graph = Graph(values=b.values, chain=chain, input_ids=inputs, output_ids=outputs,
                  constants=b.constants)
    return MethodGraph(graph, list(graph.input_ids), list(graph.output_ids), sorted(state),
                       len(m.delegate_calls), len(m.kernel_calls))


class _Builder:
    def __init__(self, m: Method):
        self.m = m
        self.constants: list[ConstantRef] = []
        self.values: list = []
        self.chain: list[OpCall] = []
        self.planned: set[int] = set()
        self.slots: dict[int, Slot] = {}
        self._refs: dict[int, int] = {}
        self.values = [None] * len(m.values)  # absent optional tensors append Nulls after
        for i, v in enumerate(m.values):
            self.values[i] = self._value(v, i)

    def _value(self, v, i: int):
        if isinstance(v, ProgramTensor):
            dtype = _DTYPES.get(v.dtype)
            if dtype is None:
                raise PteFormatError(f"tensor of dtype {v.dtype}", field=f"values[{i}]")
            if v.dim_order is not None and v.dim_order != tuple(range(len(v.sizes))):
                raise UnsupportedOpError(
                    f"{self.m.name}: value {i} has dim order {list(v.dim_order)}; webpte runs "
                    "contiguous tensors only (export without channels-last memory format)",
                    ops=["dim order"])
            cid = -1
            if v.constant is not None:
                cid = len(self.constants)
                self.constants.append(v.constant)
            elif v.planned:
                self.planned.add(i)
                if v.mem is not None:
                    n = _ITEMSIZE[v.dtype]
                    for d in v.sizes:
                        n *= d
                    self.slots[i] = Slot(v.mem[0], v.mem[1], n)
            return TensorValue(dtype, tuple(v.sizes), cid)
        if isinstance(v, ValueRefs):
            if v.kind == "int_list":
                items = [self.m.values[j] if j >= 0 else None for j in v.ids]
                if not all(integral(x) for x in items):
                    raise PteFormatError("int list holds a non-Int value", field=f"values[{i}]")
                return tuple(int(x) for x in items)
            return ValueList(tuple(j if j >= 0 else self._null() for j in v.ids))
        return v

    def _null(self) -> int:
        self.values.append(None)
        return len(self.values) - 1

    def delegate(self, i: int) -> None:
        call = self.m.delegate_calls[i]
        g = self.m.graphs.get(call.delegate_index)
        if g is None:
            raise PteFormatError(f"delegate {call.delegate_index} ({call.backend}) is not a "
                                 f"VulkanBackend graph", field=f"{self.m.name}.DelegateCall")
        n_in = len(g.input_ids)
        outs = call.args[n_in:]
        if len(call.args) < n_in:
            raise PteFormatError(f"delegate call passes {len(call.args)} values for a graph "
                                 f"of {n_in} inputs", field=f"{self.m.name}.delegate_call")
        remap: dict[int, int] = dict(zip(g.input_ids, call.args[:n_in]))
        duplicates: list[tuple[int, int]] = []  # (call output, the call output it repeats)
        if len(outs) > len(g.output_ids):
            picks = _merged_outputs(g, outs, self.values, self.m.name)
            first = {k: outs[picks.index(k)] for k in set(picks)}
            remap.update((g.output_ids[k], v) for k, v in first.items())
            duplicates = [(o, first[k]) for o, k in zip(outs, picks) if o != first[k]]
        # A graph built without alias_buffer_mutations lists the updated mutable buffers
        # first and the user outputs (what the call passes) last.
        n_mut = max(len(g.output_ids) - len(outs), 0)
        if not duplicates:
            remap.update(zip(g.output_ids[n_mut:], outs))
        # A graph value that is an input and an output (a cache the caller passes and gets
        # back updated): the output's method value, holding the input's content first.
        for vid, src in zip(g.input_ids, call.args[:n_in], strict=True):
            if remap[vid] != src:
                self.values.append(False)
                flag = len(self.values) - 1
                self.chain.append(OpCall(_COPY, (remap[vid], src, flag, remap[vid]),
                                         len(self.chain)))
        base_const = len(self.constants)
        self.constants.extend(g.constants)

        def to(vid: int) -> int:
            if vid not in remap:
                v = g.values[vid]
                remap[vid] = len(self.values)
                self.values.append(None)
                if isinstance(v, TensorValue) and v.is_constant:
                    v = TensorValue(v.dtype, v.dims, v.constant_id + base_const)
                elif isinstance(v, TensorValue):
                    v = TensorValue(v.dtype, v.dims)
                elif isinstance(v, ValueList):
                    v = ValueList(tuple(to(x) for x in v.ids))
                self.values[remap[vid]] = v
            return remap[vid]

        for op in g.chain:
            self.chain.append(OpCall(op.name, tuple(to(a) for a in op.args), len(self.chain)))
        for dup, src in duplicates:
            self.values.append(False)
            flag = len(self.values) - 1
            self.chain.append(OpCall(_COPY, (dup, src, flag, dup), len(self.chain)))
        for buf, new in _mutations(g, g.output_ids[:n_mut], self.m.name):
            # The update goes back into the buffer, which makes it state (prepacked, then
            # written again).
            self.values.append(False)
            flag = len(self.values) - 1
            self.chain.append(OpCall(_COPY, (to(buf), to(new), flag, to(buf)), len(self.chain)))

    def state_ids(self) -> set[int]:
        """Planned values read before they are written, and prepacked values written again."""
        written: set[int] = set()
        prepacked: set[int] = set()
        state: set[int] = set()
        for op in self.chain:
            if not op.args:
                # Checked here, not only by the op's schema: state is found before lowering.
                raise PlanError(f"{op.name} (node {op.node_id}): the call passes no arguments; "
                                "every op needs at least its output")
            *ins, out = op.args
            outs = self._tensors(out)
            for vid in ins:
                for v in self._tensors(vid):
                    # (a multi-output kernel's out tensors come before their list: not read)
                    if v in self.planned and v not in written and v not in outs:
                        state.add(v)
            for v in outs:
                if v in prepacked:
                    state.add(v)
                written.add(v)
            if op.name == _PREPACK:
                prepacked.update(outs)
        return state

    def _tensors(self, vid: int) -> tuple[int, ...]:
        v = self.values[vid]
        return v.ids if isinstance(v, ValueList) else (vid,)


def _mutations(g: Graph, updated: list[int], method: str) -> list[tuple[int, int]]:
    """(buffer, updated value) pairs of a delegate's mutated-buffer outputs.

    The graph keeps the buffers as prepacked constants and lists their updates in the
    buffers' order: the k-th update of a dtype and shape belongs to the k-th prepacked
    constant of that dtype and shape that the graph reads.
    """
    if not updated:
        return []
    read = {a for op in g.chain if op.name != _PREPACK for a in op.args}
    free: list[int] = []
    for op in g.chain:
        if op.name == _PREPACK and op.args[-1] in read and g.tensor(op.args[0]).is_constant:
            free.append(op.args[-1])
    pairs = []
    for new in updated:
        t = g.tensor(new)
        match = next((b for b in free if g.tensor(b).dims == t.dims
                      and g.tensor(b).dtype == t.dtype), None)
        if match is None:
            raise PteFormatError(f"delegate output {new} {list(t.dims)} is not passed by the "
                                 f"call and matches no mutable buffer of the graph",
                                 field=f"{method}.delegate_call")
        free.remove(match)
        pairs.append((match, new))
    return pairs


def _merged_outputs(g: Graph, outs: tuple[int, ...], values: list, method: str) -> list[int]:
    """The graph output each of a call's outputs receives, when the call passes more outputs
    than the graph has.

    A lowered module that returns one value twice (an index and a copy of it the partition
    folded away) is serialized with the value listed once (the Vulkan graph builder reads
    the output node's `all_input_nodes`), while the call still passes a tensor for each
    place. ExecuTorch's runtimes then write one of them and leave the other unwritten (the
    Vulkan backend the last outputs, the WebGPU backend the first); webpte writes the value
    to each. The places are the one assignment in first-appearance order whose dtypes and
    shapes match; more than one is refused by name.
    """
    want = list(g.output_ids)
    found: list[list[int]] = []

    def fits(vid: int, gid: int) -> bool:
        a, b = values[vid], g.values[gid]
        if not (isinstance(a, TensorValue) and isinstance(b, TensorValue)):
            return type(a) is type(b)
        ints = (DType.INT32, DType.INT64)
        return a.dims == b.dims and (a.dtype == b.dtype or {a.dtype, b.dtype} <= set(ints))

    def walk(j: int, seen: int, picks: list[int]) -> None:
        if len(found) > 1 or len(want) - seen > len(outs) - j:
            return
        if j == len(outs):
            found.append(list(picks))
            return
        for k in range(min(seen + 1, len(want))):
            if fits(outs[j], want[k]):
                walk(j + 1, max(seen, k + 1), [*picks, k])

    walk(0, 0, [])
    if len(found) != 1:
        how = "no" if not found else "more than one"
        raise UnsupportedOpError(
            f"{method}: a delegate call passes {len(outs)} outputs for a graph of "
            f"{len(want)}, and {how} assignment of its outputs to the call's places matches "
            "their dtypes and shapes", ops=["delegate call outputs"])
    return found[0]
