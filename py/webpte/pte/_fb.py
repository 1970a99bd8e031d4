"""Bounds-checked flatbuffer table access on top of the `flatbuffers` runtime.

The runtime's own `Table` trusts every offset; a corrupt file would give an
IndexError, a struct.error or a huge loop. Every read here is checked against the
buffer first and failures become `PteFormatError` naming the field and offset.
"""

from __future__ import annotations

from flatbuffers import encode
from flatbuffers import number_types as N

from ..errors import PteFormatError

_SCALARS = {
    "bool": N.BoolFlags,
    "u8": N.Uint8Flags,
    "i8": N.Int8Flags,
    "u16": N.Uint16Flags,
    "i16": N.Int16Flags,
    "u32": N.Uint32Flags,
    "i32": N.Int32Flags,
    "u64": N.Uint64Flags,
    "i64": N.Int64Flags,
    "f64": N.Float64Flags,
}


class FbTable:
    """One flatbuffer table at `pos` of `buf`, with checked field accessors."""

    __slots__ = ("buf", "pos", "name", "_vt", "_vt_len")

    def __init__(self, buf: bytes, pos: int, name: str):
        self.buf = buf
        self.pos = pos
        self.name = name
        _need(buf, pos, 4, name)
        vt = pos - encode.Get(N.SOffsetTFlags.packer_type, buf, pos)
        _need(buf, vt, 4, f"{name}.vtable")
        vt_len = encode.Get(N.VOffsetTFlags.packer_type, buf, vt)
        if vt_len < 4 or vt_len % 2:
            raise PteFormatError(f"bad vtable length {vt_len}", offset=vt, field=name)
        _need(buf, vt, vt_len, f"{name}.vtable")
        self._vt = vt
        self._vt_len = vt_len

    def _field(self, slot: int) -> int:
        """Absolute position of a field, or 0 when absent."""
        voff = 4 + 2 * slot
        if voff >= self._vt_len:
            return 0
        rel = encode.Get(N.VOffsetTFlags.packer_type, self.buf, self._vt + voff)
        return self.pos + rel if rel else 0

    def has(self, slot: int) -> bool:
        return self._field(slot) != 0

    def scalar(self, slot: int, kind: str, default=0):
        at = self._field(slot)
        if not at:
            return default
        flags = _SCALARS[kind]
        _need(self.buf, at, flags.bytewidth, f"{self.name}[{slot}]")
        return encode.Get(flags.packer_type, self.buf, at)

    def _indirect(self, at: int, what: str) -> int:
        _need(self.buf, at, 4, what)
        target = at + encode.Get(N.UOffsetTFlags.packer_type, self.buf, at)
        _need(self.buf, target, 4, what)
        return target

    def table(self, slot: int, name: str) -> FbTable | None:
        at = self._field(slot)
        if not at:
            return None
        return FbTable(self.buf, self._indirect(at, f"{self.name}.{name}"), name)

    def string(self, slot: int, name: str) -> str | None:
        raw = self.bytes(slot, name)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PteFormatError("string is not UTF-8", field=f"{self.name}.{name}") from e

    def _vector(self, slot: int, elem_size: int, name: str) -> tuple[int, int] | None:
        at = self._field(slot)
        if not at:
            return None
        where = f"{self.name}.{name}"
        start = self._indirect(at, where)
        n = encode.Get(N.UOffsetTFlags.packer_type, self.buf, start)
        _need(self.buf, start + 4, n * elem_size, where)
        return start + 4, n

    def bytes(self, slot: int, name: str) -> bytes | None:
        vec = self._vector(slot, 1, name)
        if vec is None:
            return None
        start, n = vec
        return bytes(self.buf[start : start + n])

    def scalars(self, slot: int, kind: str, name: str) -> list:
        flags = _SCALARS[kind]
        vec = self._vector(slot, flags.bytewidth, name)
        if vec is None:
            return []
        start, n = vec
        w = flags.bytewidth
        return [encode.Get(flags.packer_type, self.buf, start + i * w) for i in range(n)]

    def tables(self, slot: int, name: str) -> list[FbTable]:
        vec = self._vector(slot, 4, name)
        if vec is None:
            return []
        start, n = vec
        return [FbTable(self.buf, self._indirect(start + 4 * i, f"{name}[{i}]"), f"{name}[{i}]")
                for i in range(n)]

    def union(self, type_slot: int, value_slot: int, name: str) -> tuple[int, FbTable | None]:
        tag = self.scalar(type_slot, "u8")
        if tag == 0:
            return 0, None
        return tag, self.table(value_slot, name)


def _need(buf: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise PteFormatError(
            f"{size} bytes at {pos} run past the end of a {len(buf)}-byte buffer",
            offset=pos, field=what)


def root(buf: bytes, identifier: bytes, name: str) -> FbTable:
    """The root table of a flatbuffer with the given 4-byte file identifier."""
    if len(buf) < 8:
        raise PteFormatError(f"{len(buf)} bytes is too short for a flatbuffer", offset=0,
                             field=name)
    if bytes(buf[4:8]) != identifier:
        raise PteFormatError(
            f"file identifier is {bytes(buf[4:8])!r}, expected {identifier!r}", offset=4,
            field=name)
    pos = encode.Get(N.UOffsetTFlags.packer_type, buf, 0)
    return FbTable(buf, pos, name)
