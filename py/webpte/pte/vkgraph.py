"""The VK00 graph inside a VulkanBackend delegate blob (header, flatbuffer, constants)."""

from __future__ import annotations

import struct

from ..errors import PteFormatError
from ._fb import FbTable, root
from .data_file import DataMap
from .graph import ConstantRef, DType, Graph, OpCall, SymIntValue, TensorValue, Value, ValueList

_MAX_RANK = 16
_MAX_TENSOR_BYTES = 1 << 34  # 16 GiB: nothing webpte runs comes near it
_NO_OFFSET = (1 << 64) - 1


def check_dims(dims, field_name: str) -> None:
    if len(dims) > _MAX_RANK:
        raise PteFormatError(f"rank {len(dims)} > {_MAX_RANK}", field=field_name)
    numel = 1
    for d in dims:
        if d < 0:
            raise PteFormatError(f"negative dim {d}", field=field_name)
        numel *= d
    if numel * 8 > _MAX_TENSOR_BYTES:
        raise PteFormatError(f"dims {list(dims)} describe an absurdly large tensor",
                             field=field_name)


class FileBlob:
    """A byte range of the file (or of an inline vector) without copying it."""

    def __init__(self, data, start: int, size: int, file_offset: int | None = None):
        self.data, self.start, self.size = data, start, size
        self.file_offset = start if file_offset is None else file_offset

    def read(self, off: int, size: int, what: str) -> bytes:
        if off < 0 or size < 0 or off + size > self.size:
            raise PteFormatError(f"{what} {off}+{size} outside the {self.size}-byte delegate blob",
                                 field=what)
        return bytes(self.data[self.start + off: self.start + off + size])


def read_vk_blob(blob: FileBlob, named: DataMap, method: str) -> Graph:
    """The graph of one delegate blob; named constants' bytes are looked up in `named`."""
    head = blob.read(0, 30, "delegate header")
    if head[4:8] != b"VH00":
        raise PteFormatError(f"delegate header magic {head[4:8]!r}, expected b'VH00'",
                             offset=blob.file_offset + 4, field="VH00")
    hlen, fb_off, fb_size, bytes_off, bytes_size = struct.unpack_from("<HIIIQ", head, 8)
    if hlen < 30:
        raise PteFormatError(f"delegate header length {hlen}", offset=blob.file_offset + 8)
    fb = blob.read(fb_off, fb_size, "VK00 flatbuffer")
    if bytes_off + bytes_size > blob.size:
        raise PteFormatError("delegate constant bytes run past the blob",
                             offset=blob.file_offset + 18)
    g = root(fb, b"VK00", "VkGraph")
    values = [_vk_value(t, i) for i, t in enumerate(g.tables(2, "values"))]
    n = len(values)
    constants = []
    for i, c in enumerate(g.tables(5, "constants")):
        off, length, key = c.scalar(0, "u64"), c.scalar(1, "u64"), c.string(2, "named_key")
        if off == _NO_OFFSET or key:
            if not key:
                raise PteFormatError(f"constant {i} has neither an offset nor a key",
                                     field=f"constants[{i}]")
            constants.append(named.constant(key, length, f"{method} constant {i}"))
        else:
            if off + length > bytes_size:
                raise PteFormatError(f"constant {i} {off}+{length} outside {bytes_size} bytes",
                                     field=f"constants[{i}]")
            constants.append(ConstantRef(blob.file_offset + bytes_off + off, length, None))
    chain = []
    for t in g.tables(1, "chain"):
        name = t.string(1, "name") or ""
        args = tuple(t.scalars(2, "i32", "args"))
        bad = [a for a in args if not 0 <= a < n]
        if bad or not name:
            raise PteFormatError(f"op {name!r} has argument ids {bad} of {n} values",
                                 field=f"{t.name}")
        chain.append(OpCall(name, args, t.scalar(0, "u32")))
    graph = Graph(values=values, chain=chain,
                  input_ids=g.scalars(3, "u32", "input_ids"),
                  output_ids=g.scalars(4, "u32", "output_ids"), constants=constants)
    _validate_graph(graph, method)
    return graph


def _vk_value(t: FbTable, idx: int) -> Value:
    tag, body = t.union(0, 1, f"values[{idx}]")
    where = f"values[{idx}]"
    if tag in (0, 1):
        return None
    if body is None:
        raise PteFormatError(f"value tag {tag} has no body", field=where)
    if tag == 2:
        return body.scalar(0, "i64")
    if tag == 3:
        return float(body.scalar(0, "f64", 0.0))
    if tag == 4:
        return bool(body.scalar(0, "bool"))
    if tag == 5:
        dt = body.scalar(0, "i8")
        if dt not in DType._value2member_map_:
            raise PteFormatError(f"unknown tensor datatype {dt}", field=f"{where}.datatype")
        dims = tuple(body.scalars(1, "u32", "dims"))
        check_dims(dims, f"{where}.dims")
        return TensorValue(DType(dt), dims, body.scalar(2, "i32"), body.scalar(3, "i32"))
    if tag == 6:
        return tuple(body.scalars(0, "i64", "items"))
    if tag == 7:
        return tuple(float(x) for x in body.scalars(0, "f64", "items"))
    if tag == 8:
        return tuple(bool(x) for x in body.scalars(0, "bool", "items"))
    if tag == 9:
        return ValueList(tuple(body.scalars(0, "i32", "items")))
    if tag == 10:
        return body.string(0, "string_val") or ""
    if tag == 11:
        return SymIntValue(body.scalar(0, "i32"))
    raise PteFormatError(f"unknown value tag {tag}", field=where)


def _validate_graph(g: Graph, method: str) -> None:
    n = len(g.values)
    for what, ids in (("input_ids", g.input_ids), ("output_ids", g.output_ids)):
        for i in ids:
            if not 0 <= i < n:
                raise PteFormatError(f"{what} has dangling value id {i} of {n}",
                                     field=f"{method}.{what}")
            if not isinstance(g.values[i], TensorValue):
                raise PteFormatError(f"{what} value {i} is not a tensor", field=f"{method}.{what}")
    for i, v in enumerate(g.values):
        if isinstance(v, ValueList):
            bad = [x for x in v.ids if not 0 <= x < n]
            if bad:
                raise PteFormatError(f"value list {i} has dangling ids {bad}",
                                     field=f"values[{i}]")
        elif isinstance(v, TensorValue) and v.is_constant:
            if v.constant_id >= len(g.constants):
                raise PteFormatError(f"tensor {i} uses constant {v.constant_id} of "
                                     f"{len(g.constants)}", field=f"values[{i}].constant_id")
            # 64-bit constants are stored narrowed to 32 bits.
            need = v.numel * min(v.dtype.itemsize, 4)
            have = g.constants[v.constant_id].nbytes
            if have and have < need:
                raise PteFormatError(f"tensor {i} needs {need} bytes, constant has {have}",
                                     field=f"values[{i}].constant_id")
