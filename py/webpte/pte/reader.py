"""Read an ExecuTorch `.pte` container and the VK00 graphs of its delegates.

Only the flatbuffer regions are copied into Python; constant data stays in the
file (or in the external data files, `.ptd`, a program keeps constants in) and is
described by absolute byte ranges of one file (`ConstantRef`).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field

from ..errors import InputError, PteFormatError
from ._fb import FbTable, root
from .data_file import DataFile, DataMap
from .graph import ConstantRef, Graph
from .vkgraph import FileBlob, check_dims, read_vk_blob

# ExecuTorch ScalarType codes -> numpy dtype names (program-level tensors).
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64",
                 5: "float16", 6: "float32", 7: "float64", 11: "bool"}
_EVALUE_TAGS = {1: "null", 2: "int", 3: "bool", 4: "double", 5: "tensor", 6: "string",
                7: "int_list", 8: "double_list", 9: "bool_list", 10: "tensor_list",
                11: "optional_tensor_list"}


@dataclass(frozen=True)
class MethodIO:
    """One input or output of a method, as the program declares it."""

    value_index: int
    kind: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    name: str | None = None
    # shape_dynamism DYNAMIC_BOUND: `shape` is an upper bound, a call may pass smaller dims
    dynamic: bool = False

    def as_dict(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "dtype": self.dtype,
               "shape": list(self.shape) if self.shape is not None else None}
        if self.dynamic:
            out["dynamic"] = "bound"
        return out


@dataclass(frozen=True)
class DelegateCall:
    delegate_index: int
    backend: str
    args: tuple[int, ...]
    inline: bool = False  # blob stored in the flatbuffer (INLINE) rather than a segment


@dataclass(frozen=True)
class KernelCall:
    """A non-delegated kernel call of the execution plan: `name` as the program spells it
    (`aten::add.Scalar_out`), `args` method value indices (schema order, outputs last)."""

    name: str
    args: tuple[int, ...]


@dataclass(frozen=True)
class ProgramTensor:
    """A tensor of the execution plan's values.

    `constant`: where its data lies (a constant of the program), else None.
    `planned`: the runtime allocates it at load (allocation_info) — a mutable buffer (KV
    cache) when no instruction of the method writes it as an output before it is read.
    """

    dtype: str
    sizes: tuple[int, ...]
    constant: ConstantRef | None = None
    planned: bool = False
    name: str | None = None
    # (memory_id, byte offset) of a planned tensor: tensors whose byte ranges in one memory
    # overlap share storage, as in ExecuTorch's runtime (planner/aliasing.py).
    mem: tuple[int, int] | None = None
    # The order of dims in memory (None: contiguous, outermost first).
    dim_order: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ValueRefs:
    """An IntList / TensorList / OptionalTensorList value: indices of other values
    (-1 for an absent optional tensor)."""

    kind: str
    ids: tuple[int, ...]


@dataclass
class Method:
    name: str
    inputs: list[MethodIO]
    outputs: list[MethodIO]
    delegate_calls: list[DelegateCall] = field(default_factory=list)
    host_ops: list[str] = field(default_factory=list)
    graphs: dict[int, Graph] = field(default_factory=dict)
    constant: object = None
    is_constant: bool = False
    # The instruction chain in order: ("delegate", i) -> delegate_calls[i],
    # ("kernel", i) -> kernel_calls[i]. Moves, jumps and frees are not kept.
    instructions: list[tuple[str, int]] = field(default_factory=list)
    kernel_calls: list[KernelCall] = field(default_factory=list)
    # Every value of the execution plan: None, int, float, bool, str, tuples of floats or
    # bools (Double/BoolList), ValueRefs, ProgramTensor.
    values: list = field(default_factory=list)

    @property
    def graph(self) -> Graph:
        """The single VK00 graph of a one-delegate method."""
        if len(self.delegate_calls) != 1 or self.host_ops:
            raise PteFormatError(
                f"method {self.name!r} has {len(self.delegate_calls)} delegate calls and "
                f"{len(self.host_ops)} host ops; webpte runs one VulkanBackend delegate per method")
        return self.graphs[self.delegate_calls[0].delegate_index]

    def input_value_ids(self) -> list[int]:
        """Graph value id of each method input, in the method's order."""
        call = self.delegate_calls[0]
        graph = self.graph
        n_in = len(graph.input_ids)
        mapping = {ev: graph.input_ids[j] for j, ev in enumerate(call.args[:n_in])}
        try:
            return [mapping[io.value_index] for io in self.inputs]
        except KeyError as e:
            raise PteFormatError(f"method input value {e.args[0]} is not an argument of the "
                                 f"delegate call", field=f"{self.name}.inputs") from None

    def output_value_ids(self) -> list[int]:
        """Graph value id of each method output, in the method's order."""
        call = self.delegate_calls[0]
        graph = self.graph
        n_in = len(graph.input_ids)
        outs = call.args[n_in:]
        if len(outs) != len(graph.output_ids):
            raise PteFormatError(f"delegate call passes {len(outs)} outputs, graph has "
                                 f"{len(graph.output_ids)}", field=f"{self.name}.delegate_call")
        mapping = {ev: graph.output_ids[j] for j, ev in enumerate(outs)}
        try:
            return [mapping[io.value_index] for io in self.outputs]
        except KeyError as e:
            raise PteFormatError(f"method output value {e.args[0]} is not an output of the "
                                 f"delegate call", field=f"{self.name}.outputs") from None


@dataclass
class PteProgram:
    methods: dict[str, Method]
    file_size: int
    segment_base_offset: int
    # The external data files its constants were looked up in (ConstantRef.file k: k-1).
    data_files: list[DataFile] = field(default_factory=list)

    def method(self, name: str) -> Method:
        if name not in self.methods:
            raise InputError(f"program has no method {name!r:.80}; it has "
                             f"{[m[:80] for m in sorted(self.methods)]}")
        return self.methods[name]


def open_source(path: str | os.PathLike):
    """Map a file read-only; the result slices like bytes."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise PteFormatError("file is empty", offset=0)
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def read_program(data, data_files: list[DataFile] | tuple = ()) -> PteProgram:
    """Parse a `.pte` held in `data` (bytes, bytearray, memoryview or mmap); constants it
    keeps outside the file are looked up in `data_files` (`data_file.read_data_file`).

    Raises `PteFormatError` for any malformed input, `ExternalDataError` for a constant no
    data file (rightly) holds.
    """
    size = len(data)
    head = bytes(data[0:40])
    if len(head) < 8:
        raise PteFormatError(f"{size} bytes is too short for a program", offset=0)
    if head[4:8] != b"ET12":
        raise PteFormatError(f"file identifier is {head[4:8]!r}, expected b'ET12'", offset=4,
                             field="Program")
    program_size, seg_base = size, 0
    if len(head) >= 40 and head[8:12] == b"eh00":
        (hlen,) = struct.unpack_from("<I", head, 12)
        if hlen < 32:
            raise PteFormatError(f"extended header length {hlen} < 32", offset=12)
        program_size, seg_base, seg_size = struct.unpack_from("<QQQ", head, 16)
        if not 8 <= program_size <= size:
            raise PteFormatError(f"program_size {program_size} outside the {size}-byte file",
                                 offset=16)
        if seg_base and (seg_base < program_size or seg_base + seg_size > size):
            raise PteFormatError(f"segment region {seg_base}+{seg_size} outside the "
                                 f"{size}-byte file", offset=24)
    buf = bytes(data[0:program_size])
    prog = root(buf, b"ET12", "Program")
    ctx = _Ctx(data, size, seg_base)
    ctx.segments = [_segment(t, ctx) for t in prog.tables(4, "segments")]
    ctx.inline = prog.tables(3, "backend_delegate_data")
    ctx.constant_segment = _constant_segment(prog.table(5, "constant_segment"), ctx)
    own = {}
    for t in prog.tables(7, "named_data"):
        key = t.string(0, "key")
        idx = t.scalar(1, "u32")
        if key is None or idx >= len(ctx.segments):
            raise PteFormatError(f"named data {key!r} points at segment {idx} of "
                                 f"{len(ctx.segments)}", field="named_data")
        own[key] = ctx.segments[idx]
    ctx.named = DataMap(own, data_files)
    methods: dict[str, Method] = {}
    for plan in prog.tables(1, "execution_plan"):
        m = _method(plan, ctx)
        if m.name in methods:
            raise PteFormatError(f"method {m.name!r} appears twice", field="execution_plan")
        methods[m.name] = m
    if not methods:
        raise PteFormatError("program has no methods", field="execution_plan")
    return PteProgram(methods=methods, file_size=size, segment_base_offset=seg_base,
                      data_files=list(data_files))


class _Ctx:
    def __init__(self, data, size: int, seg_base: int):
        self.data = data
        self.size = size
        self.seg_base = seg_base
        self.segments: list[tuple[int, int]] = []
        self.inline: list[FbTable] = []
        self.named = DataMap({})
        self.constant_segment: tuple[int, list[int]] | None = None


def _constant_segment(t: FbTable | None, ctx: _Ctx) -> tuple[int, list[int]] | None:
    """(absolute start, offsets) of the constant segment, or None when there is none."""
    if t is None:
        return None
    idx = t.scalar(0, "u32")
    offsets = t.scalars(1, "u64", "offsets")
    if not offsets:
        return None
    if idx >= len(ctx.segments):
        raise PteFormatError(f"constant segment {idx} of {len(ctx.segments)}",
                             field="constant_segment")
    return ctx.segments[idx][0], offsets


def _segment(t: FbTable, ctx: _Ctx) -> tuple[int, int]:
    off, size = t.scalar(0, "u64"), t.scalar(1, "u64")
    start = ctx.seg_base + off
    if start + size > ctx.size:
        raise PteFormatError(f"segment {off}+{size} runs past the file end", field=t.name)
    return start, size


def _method(plan: FbTable, ctx: _Ctx) -> Method:
    name = plan.string(0, "name") or ""
    values = plan.tables(2, "values")
    n = len(values)

    def io(idx: int, what: str) -> MethodIO:
        if not 0 <= idx < n:
            raise PteFormatError(f"{what} value index {idx} of {n}", field=f"{name}.{what}")
        return _evalue_io(values[idx], idx)

    inputs = [io(i, "inputs") for i in plan.scalars(3, "i32", "inputs")]
    outputs = [io(i, "outputs") for i in plan.scalars(4, "i32", "outputs")]
    operators = [(t.string(0, "name") or "") + (("." + t.string(1, "overload"))
                                              if t.string(1, "overload") else "")
                 for t in plan.tables(6, "operators")]
    delegates = plan.tables(7, "delegates")
    method = Method(name=name, inputs=inputs, outputs=outputs)
    method.values = [_evalue(values[i], i, n, ctx, name) for i in range(n)]
    for chain in plan.tables(5, "chains"):
        for instr in chain.tables(2, "instructions"):
            tag, body = instr.union(0, 1, "instr_args")
            if tag == 1 and body is not None:
                op = body.scalar(0, "i32")
                if not 0 <= op < len(operators):
                    raise PteFormatError(f"kernel call to operator {op} of {len(operators)}",
                                         field=f"{name}.KernelCall")
                args = tuple(body.scalars(1, "i32", "args"))
                if any(not 0 <= a < n for a in args):
                    raise PteFormatError("kernel call argument out of range",
                                         field=f"{name}.KernelCall")
                method.host_ops.append(operators[op])
                method.instructions.append(("kernel", len(method.kernel_calls)))
                method.kernel_calls.append(KernelCall(operators[op], args))
            elif tag == 2 and body is not None:
                d = body.scalar(0, "i32")
                args = tuple(body.scalars(1, "i32", "args"))
                if not 0 <= d < len(delegates):
                    raise PteFormatError(f"delegate call to delegate {d} of {len(delegates)}",
                                         field=f"{name}.DelegateCall")
                if any(not 0 <= a < n for a in args):
                    raise PteFormatError("delegate call argument out of range",
                                         field=f"{name}.DelegateCall")
                backend = delegates[d].string(0, "id") or ""
                ref = delegates[d].table(1, "processed")
                inline = ref is not None and ref.scalar(0, "u8") == 0
                method.instructions.append(("delegate", len(method.delegate_calls)))
                method.delegate_calls.append(DelegateCall(d, backend, args, inline))
                if backend != "VulkanBackend":
                    method.host_ops.append(f"delegate:{backend}")
                elif d not in method.graphs:
                    method.graphs[d] = _delegate_graph(delegates[d], ctx, name)
            elif tag not in (3, 4, 5):
                raise PteFormatError(f"unknown instruction tag {tag}", field=f"{name}.instr")
    if not inputs and len(outputs) == 1 and not method.delegate_calls and not method.host_ops:
        kind = outputs[0].kind
        if kind in ("int", "bool", "double"):
            method.is_constant = True
            method.constant = _evalue_scalar(values[outputs[0].value_index])
    return method


def _evalue_io(t: FbTable, idx: int) -> MethodIO:
    tag, body = t.union(0, 1, f"values[{idx}]")
    kind = _EVALUE_TAGS.get(tag)
    if kind is None and tag != 0:
        raise PteFormatError(f"unknown EValue tag {tag}", field=f"values[{idx}]")
    if kind == "tensor" and body is not None:
        st = body.scalar(0, "i8")
        if st not in _SCALAR_TYPES:
            raise PteFormatError(f"unknown scalar type {st}", field=f"values[{idx}].scalar_type")
        sizes = tuple(body.scalars(2, "i32", "sizes"))
        check_dims(sizes, f"values[{idx}].sizes")
        dynamism = body.scalar(8, "i8")
        if dynamism not in (0, 1, 2):
            raise PteFormatError(f"unknown shape dynamism {dynamism}",
                                 field=f"values[{idx}].shape_dynamism")
        return MethodIO(idx, "tensor", _SCALAR_TYPES[st], sizes, dynamic=dynamism != 0)
    return MethodIO(idx, kind or "null")


_EXTERNAL = 1   # ExtraTensorInfo.location: the data is in an external file, keyed by name
_SCALAR_SIZES = {"uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
                 "float32": 4, "float64": 8, "bool": 1}


def _evalue(t: FbTable, idx: int, n: int, ctx: _Ctx, method: str):
    """One execution-plan value in the form `Method.values` holds."""
    tag, body = t.union(0, 1, f"values[{idx}]")
    where = f"{method}.values[{idx}]"
    if tag in (0, 1) or body is None:
        return None
    if tag in (2, 3, 4):
        return _evalue_scalar(t)
    if tag == 5:
        io = _evalue_io(t, idx)
        buffer_idx = body.scalar(5, "u32")
        alloc = body.table(6, "allocation_info")
        planned = alloc is not None
        mem = None
        if alloc is not None:
            mem = (alloc.scalar(0, "u32"),
                   alloc.scalar(1, "u32") | (alloc.scalar(2, "u32") << 32))
        order = tuple(body.scalars(3, "u8", "dim_order"))
        if order and sorted(order) != list(range(len(io.shape))):
            raise PteFormatError(f"dim order {list(order)} is not a permutation of the "
                                 f"{len(io.shape)} dims", field=where)
        extra = body.table(9, "extra_tensor_info")
        fqn = extra.string(1, "fully_qualified_name") if extra is not None else None
        external = extra is not None and extra.scalar(2, "u8") == _EXTERNAL
        constant = None
        if external and not planned:
            if not fqn:
                raise PteFormatError("an external constant has no fully qualified name",
                                     field=where)
            nbytes = _SCALAR_SIZES[io.dtype]
            for d in io.shape:
                nbytes *= d
            constant = ctx.named.constant(fqn, nbytes, f"{method} constant {fqn!r}",
                                          io.dtype, io.shape)
        elif buffer_idx and not planned:
            seg = ctx.constant_segment
            if seg is None or buffer_idx >= len(seg[1]):
                raise PteFormatError(f"tensor data {buffer_idx} outside the constant segment",
                                     field=where)
            nbytes = _SCALAR_SIZES[io.dtype]
            for d in io.shape:
                nbytes *= d
            start = seg[0] + seg[1][buffer_idx]
            if start + nbytes > ctx.size:
                raise PteFormatError(f"constant {start}+{nbytes} runs past the file end",
                                     field=where)
            constant = ConstantRef(start, nbytes, fqn)
        return ProgramTensor(io.dtype, io.shape, constant, planned, fqn, mem,
                             order or None)
    if tag == 6:
        return body.string(0, "string_val") or ""
    if tag in (7, 10, 11):
        kind = {7: "int_list", 10: "tensor_list", 11: "optional_tensor_list"}[tag]
        ids = tuple(body.scalars(0, "i64" if tag == 7 else "i32", "items"))
        if any(not -1 <= i < n for i in ids):
            raise PteFormatError(f"{kind} refers outside the values", field=where)
        return ValueRefs(kind, ids)
    if tag == 8:
        return tuple(float(x) for x in body.scalars(0, "f64", "items"))
    if tag == 9:
        return tuple(bool(x) for x in body.scalars(0, "bool", "items"))
    raise PteFormatError(f"unknown EValue tag {tag}", field=where)


def _evalue_scalar(t: FbTable):
    tag, body = t.union(0, 1, "value")
    if body is None:
        return None
    if tag == 2:
        return body.scalar(0, "i64")
    if tag == 3:
        return bool(body.scalar(0, "bool"))
    if tag == 4:
        return body.scalar(0, "f64", 0.0)
    return None


def _delegate_graph(delegate: FbTable, ctx: _Ctx, method: str) -> Graph:
    ref = delegate.table(1, "processed")
    if ref is None:
        raise PteFormatError("delegate has no processed data", field=f"{method}.delegate")
    location, index = ref.scalar(0, "u8"), ref.scalar(1, "u32")
    if location == 1:
        if index >= len(ctx.segments):
            raise PteFormatError(f"delegate segment {index} of {len(ctx.segments)}",
                                 field=f"{method}.delegate")
        blob_start, blob_size = ctx.segments[index]
        blob = FileBlob(ctx.data, blob_start, blob_size)
    elif location == 0:
        if index >= len(ctx.inline):
            raise PteFormatError(f"inline delegate data {index} of {len(ctx.inline)}",
                                 field=f"{method}.delegate")
        vec = ctx.inline[index]
        raw = vec.bytes(0, "data") or b""
        blob = FileBlob(raw, 0, len(raw), file_offset=_inline_offset(vec))
    else:
        raise PteFormatError(f"unknown delegate data location {location}",
                             field=f"{method}.delegate")
    return read_vk_blob(blob, ctx.named, method)


def _inline_offset(vec: FbTable) -> int:
    """Absolute file position of an inline delegate's bytes (inside the flatbuffer)."""
    start = vec._field(0)
    return start + struct.unpack_from("<I", vec.buf, start)[0] + 4


