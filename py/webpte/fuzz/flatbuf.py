"""Where the fields of a `.pte` are: a walk of its ET12 flatbuffer and of every VK00 graph
inside it, driven by the schemas in py/webpte/pte/schema/*.fbs.

The walk runs on the committed (well-formed) programs only; its result, a list of `Site`s,
tells the mutators which bytes are a scalar field, an offset, a vector length, a union tag
or a value id, so that a mutant breaks one thing the reader or the planner must notice.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Field kinds: a struct format char (scalar), "str", ("table", T), ("vec", fmt),
# ("tvec", T), ("union", U) (type tag in the slot, the value in the next slot), and
# ("ids", fmt): a vector of value ids (op arguments, graph inputs/outputs, value lists).
_PROGRAM = {
    "Program": {0: ("version", "I"), 1: ("execution_plan", ("tvec", "ExecutionPlan")),
                3: ("backend_delegate_data", ("tvec", "BackendDelegateInlineData")),
                4: ("segments", ("tvec", "DataSegment")), 7: ("named_data", ("tvec", "NamedData"))},
    "ExecutionPlan": {0: ("name", "str"), 2: ("values", ("tvec", "EValue")),
                      3: ("inputs", ("ids", "i")), 4: ("outputs", ("ids", "i")),
                      5: ("chains", ("tvec", "Chain")), 6: ("operators", ("tvec", "Operator")),
                      7: ("delegates", ("tvec", "BackendDelegate")),
                      8: ("non_const_buffer_sizes", ("vec", "q"))},
    "EValue": {0: ("val", ("union", "KernelTypes"))},
    "Int": {0: ("int_val", "q")}, "Bool": {0: ("bool_val", "?")},
    "Double": {0: ("double_val", "d")}, "String": {0: ("string_val", "str")},
    "IntList": {0: ("items", ("vec", "q"))}, "DoubleList": {0: ("items", ("vec", "d"))},
    "BoolList": {0: ("items", ("vec", "?"))}, "TensorList": {0: ("items", ("ids", "i"))},
    "OptionalTensorList": {0: ("items", ("ids", "i"))}, "Null": {},
    "Tensor": {0: ("scalar_type", "b"), 1: ("storage_offset", "i"), 2: ("sizes", ("vec", "i")),
               3: ("dim_order", ("vec", "B")), 5: ("data_buffer_idx", "I")},
    "Chain": {0: ("inputs", ("ids", "i")), 1: ("outputs", ("ids", "i")),
              2: ("instructions", ("tvec", "Instruction"))},
    "Instruction": {0: ("instr_args", ("union", "InstructionArguments"))},
    "KernelCall": {0: ("op_index", "i"), 1: ("args", ("ids", "i"))},
    "DelegateCall": {0: ("delegate_index", "i"), 1: ("args", ("ids", "i"))},
    "MoveCall": {0: ("move_from", "i"), 1: ("move_to", "i")},
    "JumpFalseCall": {0: ("cond_value_index", "i"), 1: ("destination_instruction", "i")},
    "FreeCall": {0: ("value_index", "i")},
    "Operator": {0: ("name", "str"), 1: ("overload", "str")},
    "BackendDelegate": {0: ("id", "str"), 1: ("processed", ("table", "DataReference")),
                        2: ("compile_specs", ("tvec", "CompileSpec"))},
    "DataReference": {0: ("location", "b"), 1: ("index", "I")},
    "CompileSpec": {0: ("key", "str"), 1: ("value", ("vec", "B"))},
    "BackendDelegateInlineData": {0: ("data", ("vec", "B"))},
    "DataSegment": {0: ("offset", "Q"), 1: ("size", "Q")},
    "NamedData": {0: ("key", "str"), 1: ("segment_index", "I")},
}
_VK = {
    "VkGraph": {0: ("version", "str"), 1: ("chain", ("tvec", "OperatorCall")),
                2: ("values", ("tvec", "VkValue")), 3: ("input_ids", ("ids", "I")),
                4: ("output_ids", ("ids", "I")), 5: ("constants", ("tvec", "VkBytes"))},
    "OperatorCall": {0: ("node_id", "I"), 1: ("name", "str"), 2: ("args", ("ids", "i"))},
    "VkValue": {0: ("value", ("union", "GraphTypes"))},
    "VkTensor": {0: ("datatype", "b"), 1: ("dims", ("vec", "I")), 2: ("constant_id", "i"),
                 3: ("mem_obj_id", "i"), 4: ("storage_type", "B"), 5: ("memory_layout", "B")},
    "Null": {}, "Int": {0: ("int_val", "q")}, "Double": {0: ("double_val", "d")},
    "Bool": {0: ("bool_val", "?")}, "IntList": {0: ("items", ("vec", "q"))},
    "DoubleList": {0: ("items", ("vec", "d"))}, "BoolList": {0: ("items", ("vec", "?"))},
    "ValueList": {0: ("items", ("ids", "i"))}, "String": {0: ("string_val", "str")},
    "SymInt": {0: ("value", "i")},
    "VkBytes": {0: ("offset", "Q"), 1: ("length", "Q"), 2: ("named_key", "str")},
}
_UNIONS = {
    "KernelTypes": [None, "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList",
                    "DoubleList", "BoolList", "TensorList", "OptionalTensorList"],
    "InstructionArguments": [None, "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall",
                             "FreeCall"],
    "GraphTypes": [None, "Null", "Int", "Double", "Bool", "VkTensor", "IntList", "DoubleList",
                   "BoolList", "ValueList", "String", "SymInt"],
}


@dataclass(frozen=True)
class Site:
    """One mutable place of a program file.

    kind: "scalar" (a field or vector element, `fmt` its struct format), "tag" (a union
    type), "offset" (a uoffset to `target`, a table, vector or string of group `group`),
    "length" (a vector's length word), "vtable" (a table's vtable soffset or one entry),
    "id" (a value id; `domain` values exist in its graph).
    """

    pos: int
    kind: str
    fmt: str
    path: str
    group: str = ""
    target: int = 0
    domain: int = 0
    kinds: tuple[int, ...] = ()   # "id": the union tag of every value of its graph


class _Walk:
    def __init__(self, buf: bytes, base: int, schema: dict):
        self.buf, self.base, self.schema = buf, base, schema
        self.sites: list[Site] = []
        self.values = 0   # value count of the graph/plan being walked (domain of ids)
        self.kinds: tuple[int, ...] = ()

    def u32(self, at: int) -> int:
        return struct.unpack_from("<I", self.buf, at)[0]

    def add(self, at: int, kind: str, fmt: str, path: str, **kw) -> None:
        self.sites.append(Site(self.base + at, kind, fmt, path, **kw))

    def offset(self, at: int, path: str, group: str) -> int:
        target = at + self.u32(at)
        self.add(at, "offset", "I", path, group=group, target=self.base + target)
        return target

    def table(self, pos: int, tname: str, path: str) -> None:
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        vt_len = struct.unpack_from("<H", self.buf, vt)[0]
        self.add(pos, "vtable", "i", f"{path}.<vtable offset>")
        fields = self.schema[tname]
        if tname in ("ExecutionPlan", "VkGraph"):
            self.kinds = self._value_tags(pos, vt, vt_len)
            self.values = len(self.kinds)
        for slot, (fname, kind) in sorted(fields.items()):
            voff = 4 + 2 * slot
            if voff >= vt_len:
                continue
            self.add(vt + voff, "vtable", "H", f"{path}.{fname}<vtable entry>")
            rel = struct.unpack_from("<H", self.buf, vt + voff)[0]
            if rel:
                self.field(pos + rel, kind, f"{path}.{fname}", tname, pos, vt, vt_len, slot)

    def _value_tags(self, pos: int, vt: int, vt_len: int) -> tuple[int, ...]:
        """The union tag of each entry of the table's `values` vector (slot 2)."""
        rel = struct.unpack_from("<H", self.buf, vt + 8)[0] if vt_len > 8 else 0
        if not rel:
            return ()
        start = pos + rel + self.u32(pos + rel)
        tags = []
        for i in range(self.u32(start)):
            at = start + 4 + 4 * i
            value = at + self.u32(at)
            value_vt = value - struct.unpack_from("<i", self.buf, value)[0]
            tag_rel = struct.unpack_from("<H", self.buf, value_vt + 4)[0]
            tags.append(self.buf[value + tag_rel] if tag_rel else 0)
        return tuple(tags)

    def field(self, at: int, kind, path: str, tname: str, pos: int, vt: int, vt_len: int,
              slot: int) -> None:
        if isinstance(kind, str) and kind != "str":
            self.add(at, "scalar", kind, path)
            return
        if kind == "str":
            self.offset(at, path, f"str:{tname}.{path.rsplit('.', 1)[-1]}")
            return
        form, inner = kind
        if form == "union":
            self.add(at, "tag", "B", f"{path}<type>", domain=len(_UNIONS[inner]))
            tag = self.buf[at]
            voff = 4 + 2 * (slot + 1)
            rel = struct.unpack_from("<H", self.buf, vt + voff)[0] if voff < vt_len else 0
            names = _UNIONS[inner]
            if rel and 0 < tag < len(names):
                t = self.offset(pos + rel, f"{path}<{names[tag]}>", f"table:{names[tag]}")
                self.table(t, names[tag], f"{path}<{names[tag]}>")
            return
        if form == "table":
            self.table(self.offset(at, path, f"table:{inner}"), inner, path)
            return
        start = self.offset(at, path, f"{form}:{inner}:{path.rsplit('.', 1)[-1]}")
        n = self.u32(start)
        self.add(start, "length", "I", f"{path}<length {n}>", target=n)
        if form == "tvec":
            for i in range(n):
                at_i = start + 4 + 4 * i
                self.table(self.offset(at_i, f"{path}[{i}]", f"table:{inner}"), inner,
                           f"{path}[{i}]")
            return
        width = struct.calcsize(inner)
        for i in range(min(n, 64)):   # long byte vectors: the first elements are enough
            kind_i = "id" if form == "ids" else "scalar"
            self.add(start + 4 + width * i, kind_i, inner, f"{path}[{i}]",
                     group=path.rsplit(".", 1)[-1], domain=self.values,
                     kinds=self.kinds if form == "ids" else ())


def _root(walk: _Walk, name: str) -> None:
    walk.add(0, "offset", "I", f"{name}<root offset>", group="root")
    walk.table(walk.u32(0), name, name)


def program_sites(data: bytes) -> list[Site]:
    """Every site of a well-formed `.pte`: its extended header, the Program table tree and,
    for each VulkanBackend blob (found by its VH00 header), the header and the VkGraph tree."""
    sites: list[Site] = []
    program_size = len(data)
    if data[8:12] == b"eh00":
        program_size = struct.unpack_from("<Q", data, 16)[0]
        for at, what in ((12, "length"), (16, "program_size"), (24, "segment_base_offset"),
                         (32, "segment_data_size")):
            sites.append(Site(at, "scalar", "I" if at == 12 else "Q", f"eh00.{what}"))
    walk = _Walk(data[:program_size], 0, _PROGRAM)
    _root(walk, "Program")
    sites += walk.sites
    at = data.find(b"VH00")
    while at >= 4:
        sites += _blob_sites(data, at - 4)
        at = data.find(b"VH00", at + 4)
    return sites


def _blob_sites(data: bytes, start: int) -> list[Site]:
    if start + 30 > len(data):
        return []
    _, fb_off, fb_size, _, _ = struct.unpack_from("<HIIIQ", data, start + 8)
    fb_start = start + fb_off
    if data[fb_start + 4: fb_start + 8] != b"VK00" or fb_start + fb_size > len(data):
        return []   # "VH00" inside other bytes, not a delegate header
    sites = [Site(start + at, "scalar", fmt, f"VH00.{what}") for at, fmt, what in (
        (8, "H", "header_length"), (10, "I", "flatbuffer_offset"), (14, "I", "flatbuffer_size"),
        (18, "I", "bytes_offset"), (22, "Q", "bytes_size"))]
    walk = _Walk(data[fb_start: fb_start + fb_size], fb_start, _VK)
    _root(walk, "VkGraph")
    return sites + walk.sites
