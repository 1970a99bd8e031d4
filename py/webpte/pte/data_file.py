"""ExecuTorch external data files (`.ptd`, FlatTensor) and the named data a program's
constants look their bytes up in.

A `.ptd` is a flatbuffer (identifier `FT01`) with a 40-byte header after the identifier:
`FH01`, u32 header length, u64 flatbuffer_offset, u64 flatbuffer_size, u64
segment_base_offset, u64 segment_data_size. The root offset already accounts for the
header; the flatbuffer region is `[0, flatbuffer_offset + flatbuffer_size)`. Its root
`FlatTensor`: 0 version (u32), 1 segments `[{offset: u64, size: u64}]` (relative to
segment_base_offset), 2 named_data `[{key, segment_index: u32, tensor_layout}]`, where
`tensor_layout` (program constants only) is `{scalar_type: i8, sizes: [i32], dim_order:
[u8]}`. Only the header and the flatbuffer are read; the data stays in the file.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ExternalDataError, PteFormatError
from ._fb import FbTable, root
from .graph import ConstantRef

_HEADER = 48                 # identifier (8 bytes with the root offset) + FH01 header
_MAX_VERSION = 0             # FlatTensor schema versions this reader knows
# ExecuTorch ScalarType codes of a tensor layout -> numpy dtype names.
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64",
                 5: "float16", 6: "float32", 7: "float64", 11: "bool"}
FIX = ("pass the .ptd files written with this .pte: webpte.load(pte, data=[ptd, ...]), "
       "`--data FILE`, or loadProgram(src, {data: [url, ...]})")


@dataclass(frozen=True)
class DataEntry:
    """One key of a data file: its bytes' absolute range, and the tensor layout the file
    declares for it (program constants), else None."""

    offset: int
    nbytes: int
    dtype: str | None = None
    sizes: tuple[int, ...] | None = None


@dataclass
class DataFile:
    """A `.ptd` read: `name` (its path or URL, for messages), its keys."""

    name: str
    size: int
    entries: dict[str, DataEntry]


def read_data_file(data, name: str) -> DataFile:
    """Read the keys of the `.ptd` held in `data` (bytes, mmap or a range source).

    Raises `ExternalDataError` naming the file when it is not a well-formed `.ptd`.
    """
    try:
        return _read(data, name)
    except PteFormatError as e:
        detail = str(e).removeprefix("malformed .pte: ")
        raise ExternalDataError(f"{name} is not a well-formed .ptd data file ({detail}); "
                                f"{FIX}", file=name) from None


def _read(data, name: str) -> DataFile:
    size = len(data)
    head = bytes(data[0:_HEADER])
    if len(head) < _HEADER:
        raise PteFormatError(f"{size} bytes is too short for a .ptd", offset=0)
    if head[4:8] != b"FT01":
        raise PteFormatError(f"file identifier is {head[4:8]!r}, expected b'FT01'", offset=4)
    if head[8:12] != b"FH01":
        raise PteFormatError(f"header magic is {head[8:12]!r}, expected b'FH01'", offset=8)
    hlen, fb_off, fb_size, seg_base, seg_size = struct.unpack_from("<IQQQQ", head, 12)
    if hlen < 40:
        raise PteFormatError(f"header length {hlen} < 40", offset=12)
    fb_end = fb_off + fb_size
    if not _HEADER <= fb_end <= size:
        raise PteFormatError(f"flatbuffer {fb_off}+{fb_size} outside the {size}-byte file",
                             offset=16)
    if seg_base + seg_size > size or (seg_size and seg_base < fb_end):
        raise PteFormatError(f"segment region {seg_base}+{seg_size} outside the "
                             f"{size}-byte file", offset=32)
    ft = root(bytes(data[0:fb_end]), b"FT01", "FlatTensor")
    version = ft.scalar(0, "u32")
    if version > _MAX_VERSION:
        raise PteFormatError(f"FlatTensor version {version} is newer than webpte reads "
                             f"({_MAX_VERSION})", field="FlatTensor.version")
    segments = []
    for t in ft.tables(1, "segments"):
        off, n = t.scalar(0, "u64"), t.scalar(1, "u64")
        if off + n > seg_size:
            raise PteFormatError(f"segment {off}+{n} outside the {seg_size}-byte segment "
                                 f"region", field=t.name)
        segments.append((seg_base + off, n))
    entries: dict[str, DataEntry] = {}
    for t in ft.tables(2, "named_data"):
        key, idx = t.string(0, "key"), t.scalar(1, "u32")
        if not key or idx >= len(segments):
            raise PteFormatError(f"named data {key!r} points at segment {idx} of "
                                 f"{len(segments)}", field=t.name)
        if key in entries:
            raise PteFormatError(f"key {key!r} appears twice", field=t.name)
        entries[key] = DataEntry(*segments[idx], *_layout(t.table(2, "tensor_layout")))
    return DataFile(name, size, entries)


def _layout(t: FbTable | None) -> tuple[str | None, tuple[int, ...] | None]:
    if t is None:
        return None, None
    st = t.scalar(0, "i8")
    return _SCALAR_TYPES.get(st), tuple(t.scalars(1, "i32", "sizes"))


class DataMap:
    """The named data a program's constants name: the `.pte`'s own (file 0) and each data
    file's (file k for `files[k - 1]`); a key in two data files is refused, as ExecuTorch's
    merged data map does."""

    def __init__(self, own: dict[str, tuple[int, int]], files: Sequence[DataFile] = ()):
        self.own = own
        self.files = list(files)
        self.external: dict[str, tuple[int, DataEntry]] = {}
        for k, f in enumerate(self.files, 1):
            for key, entry in f.entries.items():
                if key in self.external:
                    other = self.files[self.external[key][0] - 1].name
                    raise ExternalDataError(f"the data files {other} and {f.name} both hold "
                                            f"the key {key!r}; give each program's data once",
                                            key=key, file=f.name)
                self.external[key] = (k, entry)

    def constant(self, key: str, nbytes: int, what: str, dtype: str | None = None,
                 sizes: tuple[int, ...] | None = None) -> ConstantRef:
        """The bytes of `key` for a constant of `nbytes` (`what` names it in messages);
        `dtype`/`sizes`: the tensor it is, checked against the layout a data file declares."""
        if key in self.own:
            start, size = self.own[key]
            if nbytes > size:
                raise PteFormatError(f"{what} wants {nbytes} bytes of a {size}-byte segment",
                                     field=what)
            return ConstantRef(start, nbytes, key)
        if key not in self.external:
            names = ", ".join(f.name for f in self.files)
            where = (f"in none of the data files given ({names})" if self.files
                     else "in an external data file (.ptd), and none was given")
            raise ExternalDataError(f"{what} keeps its bytes under the key {key!r} {where}; "
                                    f"{FIX}", key=key)
        k, entry = self.external[key]
        name = self.files[k - 1].name
        wrong = None
        if nbytes > entry.nbytes:
            wrong = f"holds {entry.nbytes} bytes, the program's tensor needs {nbytes}"
        elif dtype is not None and entry.dtype is not None and (
                entry.dtype, entry.sizes) != (dtype, tuple(sizes or ())):
            wrong = (f"holds a {entry.dtype}{list(entry.sizes or ())} tensor, the program's "
                     f"is {dtype}{list(sizes or ())}")
        if wrong:
            raise ExternalDataError(f"{what}: the key {key!r} in {name} {wrong}: that file "
                                    f"belongs to another export; {FIX}", key=key, file=name)
        return ConstantRef(entry.offset, nbytes, key, k)


def file_source(data, file: int, what: str):
    """The bytes of file `file` (0: the .pte, k: the k-th data file) among `data`: one
    source (the .pte alone) or a list of sources in that order. `what` names the reader."""
    sources = data if isinstance(data, (list, tuple)) else [data]
    if not 0 <= file < len(sources) or sources[file] is None:
        raise ExternalDataError(f"{what} reads data file {file}, but {len(sources) - 1} data "
                                f"files were given; {FIX}")
    return sources[file]
