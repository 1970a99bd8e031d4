"""Mutators: program bytes (structure-aware over `Site`s, and plain byte-level) and JSON
documents (tree edits, then text edits). Each returns the mutant and a list of one-line
descriptions of what was changed (the reproducer prints them)."""

from __future__ import annotations

import json
import math
import random
import struct

from .flatbuf import Site

_WIDTH = {"B": 1, "b": 1, "?": 1, "H": 2, "I": 4, "i": 4, "Q": 8, "q": 8, "d": 8}
_UNSIGNED = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _read(buf: bytearray, site: Site):
    """The site's value (0 where an earlier, stacked mutation cut the buffer short)."""
    if site.pos + _WIDTH[site.fmt] > len(buf):
        return 0
    return struct.unpack_from("<" + site.fmt, buf, site.pos)[0]


def _write(buf: bytearray, pos: int, fmt: str, value) -> None:
    width = _WIDTH[fmt]
    if pos < 0 or pos + width > len(buf):
        return
    if fmt == "d":
        struct.pack_into("<d", buf, pos, float(value))
    else:
        struct.pack_into("<" + _UNSIGNED[width], buf, pos, int(value) % (1 << (8 * width)))


def _interesting(fmt: str, old, path: str, size: int, rng: random.Random):
    """A value that tends to break a field of this kind (dims, dtypes and ints get the
    small values that make a well-formed but wrong graph)."""
    if fmt == "d":
        return rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, -1.0, 0.5, 3.0,
                           5e-324, old * -1.0, old * 2.0])
    if fmt == "?":
        return rng.choice([0, 1, 2, 255])
    if "dims" in path or "sizes" in path:
        return rng.choice([0, 1, 2, 3, 5, 7, 16, 255, 1023, 65536, 1 << 20, 1 << 31, old + 1,
                           max(old - 1, 0), old * 2])
    if "datatype" in path or "scalar_type" in path:
        return rng.choice([*range(9), 11, 127, -1])
    bits = 8 * _WIDTH[fmt]
    small = rng.randint(-4, 20)
    if "int_val" in path or "<IntList>.items" in path:   # dims, sizes, strides, flags
        return rng.choice([small, small, small, -old, old + 1, old - 1, 0, -1, 1 << 31, 1 << 62])
    return rng.choice([0, 1, 2, 3, -1, small, small, old + 1, old - 1, old * 2, -old, size,
                       (1 << (bits - 1)) - 1, 1 << (bits - 1), (1 << bits) - 1,
                       rng.randrange(1 << bits)])


# Fields of a graph's values whose change keeps the graph well-formed.
_GRAPH = ("<VkTensor>.dims[", "<VkTensor>.datatype", "<Int>.int_val", "<IntList>.items[",
          "<Double>.double_val", "<Bool>.bool_val", "<DoubleList>.items[", "<Tensor>.sizes[",
          "<Tensor>.scalar_type")


def _pick(sites: list[Site], rng: random.Random, kinds: tuple[str, ...]) -> Site | None:
    pool = [s for s in sites if s.kind in kinds]
    return rng.choice(pool) if pool else None


def _structural(buf: bytearray, sites: list[Site], rng: random.Random) -> str:
    op = rng.choice(["scalar", "scalar", "graph", "graph", "graph", "tag", "id", "id", "id",
                     "swap", "length", "redirect", "redirect", "offset", "vtable", "string"])
    size = len(buf)
    if op == "redirect":   # point an offset at another table/vector/string of the same group
        s = _pick(sites, rng, ("offset",))
        peers = [p for p in sites if p.kind == "offset" and p.group == s.group
                 and p.target != s.target]
        if peers:
            other = rng.choice(peers)
            _write(buf, s.pos, "I", other.target - s.pos)
            return f"redirect {s.path} @{s.pos} to the target of {other.path} (@{other.target})"
        op = "offset"
    if op == "swap":
        s = _pick(sites, rng, ("id",))
        if s is not None:
            vector = s.path.rsplit("[", 1)[0]
            peers = [p for p in sites if p.kind == "id" and p.path.rsplit("[", 1)[0] == vector]
            other = rng.choice(peers)
            a, b = _read(buf, s), _read(buf, other)
            _write(buf, s.pos, s.fmt, b)
            _write(buf, other.pos, other.fmt, a)
            return f"swap {s.path} ({a}) and {other.path} ({b})"
        op = "scalar"
    if op == "graph":   # a graph that stays well-formed: other dims, ints, lists, dtypes
        pool = [p for p in sites if p.kind == "scalar" and any(k in p.path for k in _GRAPH)]
        if pool:
            s = rng.choice(pool)
            old = _read(buf, s)
            new = _interesting(s.fmt, old, s.path, size, rng)
            _write(buf, s.pos, s.fmt, new)
            return f"graph {s.path} @{s.pos} ({s.fmt}) {old!r} -> {new!r}"
        op = "scalar"
    kinds = {"scalar": ("scalar",), "tag": ("tag",), "id": ("id",), "length": ("length",),
             "offset": ("offset",), "vtable": ("vtable",), "string": ("offset",)}[op]
    s = _pick(sites, rng, kinds)
    if s is None:
        return _bytewise(buf, [], rng)
    old = _read(buf, s)
    if op == "string" and s.group.startswith("str:"):
        at = s.target + 4 + rng.randrange(max(1, min(_read_len(buf, s.target), 64)))
        new_byte = rng.choice([0, 0x2E, 0x5F, 0x7F, 0xC3, 0xFF, rng.randrange(256)])
        if at < size:
            buf[at] = new_byte
        return f"string byte @{at} of {s.path} -> {new_byte:#x}"
    if op == "tag":
        new = rng.choice([*range(s.domain), s.domain, 255])
    elif op == "id" and s.kinds and 0 <= old < len(s.kinds) and rng.random() < 0.6:
        # Another value of the same kind (tensor for tensor, int for int): the op's schema
        # still holds and the unit sees other shapes, dtypes or aliasing.
        new = rng.choice([j for j, k in enumerate(s.kinds) if k == s.kinds[old]])
    elif op == "id":
        n = max(s.domain, 1)
        new = rng.choice([rng.randrange(n)] * 6 + [-1, n, n + 1, (1 << 31) - 1])
    elif op == "length":
        new = rng.choice([old - 1, old + 1, old + 2, 0, 2 * old, 0xFFFFFFFF, 0x40000000])
    elif op == "offset":
        new = rng.choice([old + 4, old - 4, old + 8, old + rng.randint(-64, 64), 0, 1,
                          0xFFFFFFFF, size, rng.randrange(size)])
    else:
        new = _interesting(s.fmt, old, s.path, size, rng)
    _write(buf, s.pos, s.fmt, new)
    return f"{op} {s.path} @{s.pos} ({s.fmt}) {old!r} -> {new!r}"


def _read_len(buf: bytearray, at: int) -> int:
    return struct.unpack_from("<I", buf, at)[0] if 0 <= at <= len(buf) - 4 else 0


def _bytewise(buf: bytearray, others: list[bytes], rng: random.Random) -> str:
    size = len(buf)
    if size < 16:
        buf.extend(rng.randbytes(8))
        return "append 8 random bytes"
    op = rng.choice(["flip", "smash32", "smash32", "smash64", "truncate", "splice", "dup",
                     "copy", "zero", "insert"])
    at = rng.randrange(size)
    if op == "flip":
        flips = [rng.randrange(size * 8) for _ in range(rng.randint(1, 8))]
        for bit in flips:
            buf[bit // 8] ^= 1 << (bit % 8)
        return f"flip bits {flips}"
    if op in ("smash32", "smash64"):
        fmt = "I" if op == "smash32" else "Q"
        at = rng.choice([at, at & ~3, at & ~7])
        new = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, size, size * 2,
                          (1 << 64) - 1, 1 << 40, rng.randrange(1 << 32)])
        _write(buf, at, fmt, new)
        return f"{op} @{at} -> {new:#x}"
    if op == "truncate":
        del buf[at:]
        return f"truncate to {at} bytes"
    if op == "splice" and others:
        other = rng.choice(others)
        j = rng.randrange(len(other))
        buf[at:] = other[j:]
        return f"splice: first {at} bytes + another program from byte {j}"
    n = rng.randint(1, min(256, size))
    src = rng.randrange(size - n + 1)
    if op == "dup":
        buf[at:at] = buf[src:src + n]
        return f"duplicate {n} bytes from @{src} at @{at}"
    if op == "copy":
        buf[at:at + n] = buf[src:src + n]
        return f"copy {n} bytes from @{src} over @{at}"
    if op == "zero":
        buf[at:at + n] = bytes(len(buf[at:at + n]))
        return f"zero {n} bytes at @{at}"
    buf[at:at] = rng.randbytes(n)
    return f"insert {n} random bytes at @{at}"


def mutate_program(data: bytes, sites: list[Site], others: list[bytes], rng: random.Random
                   ) -> tuple[bytes, list[str]]:
    """One to three stacked mutations, two thirds of them structure-aware."""
    buf = bytearray(data)
    steps = []
    for _ in range(1 + (rng.random() < 0.3) + (rng.random() < 0.1)):
        if sites and rng.random() < 0.67:
            steps.append(_structural(buf, sites, rng))
        else:
            steps.append(_bytewise(buf, others, rng))
    return bytes(buf), steps


# --- JSON documents --------------------------------------------------------------------

_ESCAPES = ["../x", "../../../../etc/passwd", "/etc/passwd", "C:\\Windows\\x", "\\\\host\\x",
            "http://example.com/x", "file:///etc/passwd", "a/./b", "a//b", "%2e%2e/x", "a/..",
            ".", "", " ", "tokenizer/../../x", "x\x00y", "é/ü", "a" * 300, "~/x", "a\nb",
            "tokenizer/", "/", "..", "decoder_q8.pte/"]


def _nodes(doc, path=(), out=None, limit=4000):
    """(path, value) of every node of a JSON tree, up to `limit`."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append((path, doc))
    if isinstance(doc, dict):
        for k, v in doc.items():
            _nodes(v, path + (k,), out, limit)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _nodes(v, path + (i,), out, limit)
    return out


def _replacement(old, rng: random.Random, strings: list[str]):
    choices = [None, True, False, 0, -1, 1, 3, 1.5, -0.5, 2 ** 31, 2 ** 53 + 1, 2 ** 64,
               10 ** 30, math.nan, math.inf, "", "x", rng.choice(strings), [], {}, [0], {"x": 1},
               "a" * rng.choice([100, 5000])]
    if isinstance(old, bool):
        choices += [not old, int(old)]
    elif isinstance(old, int):
        choices += [old + 1, old - 1, -old, old * 4096, str(old), float(old), old + 0.5]
    elif isinstance(old, str):
        choices += [old + old, old[:-1], old.upper(), rng.choice(strings)] * 2
    elif isinstance(old, list) and old:
        choices += [old[:-1], old + old[-1:], old[::-1], old * 3]
    return rng.choice(choices)


def _set(doc, path, value):
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _tree_edit(doc, rng: random.Random, strings: list[str]):
    nodes = _nodes(doc)
    path, old = rng.choice(nodes)
    op = rng.choice(["replace", "replace", "replace", "delete", "duplicate", "add", "move"])
    where = "/".join(str(p) for p in path) or "<root>"
    if op == "delete" and path:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return doc, f"delete {where}"
    if op == "duplicate" and isinstance(old, list) and old:
        old.insert(rng.randrange(len(old) + 1), json.loads(json.dumps(rng.choice(old))))
        return doc, f"duplicate an element of {where}"
    if op == "add" and isinstance(old, dict):
        key = rng.choice(["x", "version", "__proto__", "constructor", *old.keys()] if old
                         else ["x"])
        old[key] = _replacement(old.get(key), rng, strings)
        return doc, f"set key {key!r} of {where}"
    if op == "move":   # another node's value of the same document, moved here
        _, other = rng.choice(nodes)
        value = json.loads(json.dumps(other, allow_nan=True))
        return _set(doc, path, value), f"replace {where} by a copy of another node"
    new = _replacement(old, rng, strings)
    return _set(doc, path, new), f"replace {where} ({_short(old)}) by {_short(new)}"


def _short(v) -> str:
    text = json.dumps(v, allow_nan=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _text_edit(text: str, rng: random.Random) -> tuple[str, str]:
    op = rng.choice(["truncate", "flip", "insert", "deep", "whole"])
    at = rng.randrange(len(text) + 1)
    if op == "truncate":
        return text[:at], f"truncate the text to {at} characters"
    if op == "flip" and text:
        at = min(at, len(text) - 1)
        c = chr(rng.choice([0, 0x22, 0x2C, 0x5B, 0x5D, 0x7B, 0x7D, 0x5C, 0xE9, ord(text[at]) ^ 1]))
        return text[:at] + c + text[at + 1:], f"character {at} -> {c!r}"
    if op == "insert":
        junk = rng.choice(["]", "}", ",", "null", '"', "\\u0000", "1e999", "-", "NaN", "\ud800"])
        return text[:at] + junk + text[at:], f"insert {junk!r} at {at}"
    if op == "deep":
        depth = rng.choice([100, 1000, 100000])
        return "[" * depth + text + "]" * depth, f"nest the document {depth} lists deep"
    whole = rng.choice(["", "null", "[]", "{}", "0", "1e999", '"x"', "NaN", "true", "\x00"])
    return whole, f"replace the whole text by {whole!r}"


def mutate_json(doc_text: str, rng: random.Random, strings: list[str] | None = None
                ) -> tuple[str, list[str]]:
    """Tree edits (replace, delete, duplicate, add, move a node) on the parsed document,
    then, one time in five, a text edit (truncation, a flipped character, deep nesting)."""
    strings = _ESCAPES if strings is None else strings
    doc = json.loads(doc_text)
    steps = []
    for _ in range(1 + (rng.random() < 0.4) + (rng.random() < 0.15)):
        doc, step = _tree_edit(doc, rng, strings)
        steps.append(step)
    text = json.dumps(doc, allow_nan=True)
    if rng.random() < 0.2:
        text, step = _text_edit(text, rng)
        steps.append(step)
    return text, steps
