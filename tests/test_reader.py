"""Tier 0: the .pte reader on real exported fixtures and on corrupted copies."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from webpte.errors import ExternalDataError, PteFormatError
from webpte.pte import TensorValue, read_program

FIXTURES = Path(__file__).parent / "fixtures"
PROGRAMS = sorted(FIXTURES.glob("*.pte"))


def test_fixtures_exist():
    assert PROGRAMS, "no committed .pte fixtures (tools/export_fixtures.py writes them)"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_reads_fixture(path):
    data = path.read_bytes()
    prog = read_program(data)
    fwd = prog.method("forward")
    assert not fwd.host_ops, f"{path.name} has host graph breaks {fwd.host_ops}"
    assert len(fwd.delegate_calls) == 1 and fwd.delegate_calls[0].backend == "VulkanBackend"
    g = fwd.graph
    assert g.chain, "empty op chain"
    ins, outs = fwd.input_value_ids(), fwd.output_value_ids()
    assert sorted(ins) == sorted(g.input_ids) and sorted(outs) == sorted(g.output_ids)
    for io, vid in zip(fwd.inputs, ins, strict=True):
        t = g.values[vid]
        assert isinstance(t, TensorValue) and list(t.dims) == list(io.shape)
    for t in g.values:
        if isinstance(t, TensorValue) and t.is_constant:
            ref = g.constants[t.constant_id]
            assert 0 <= ref.offset and ref.offset + ref.nbytes <= len(data)


def test_decoder_input_order_differs_from_method():
    path = FIXTURES / "decoder_q8_tiny.pte"
    if not path.exists():
        pytest.skip("decoder fixture not exported")
    prog = read_program(path.read_bytes())
    fwd = prog.method("forward")
    # Method order is (embeds, input_pos); the graph lists input_pos first.
    assert [io.dtype for io in fwd.inputs] == ["float32", "int64"]
    ins = fwd.input_value_ids()
    assert ins != fwd.graph.input_ids and sorted(ins) == sorted(fwd.graph.input_ids)
    assert prog.method("get_max_context_len").constant == 32
    assert prog.method("use_kv_cache").constant is True


@pytest.mark.parametrize("bad,needle", [
    (b"", "too short"),
    (b"\0" * 64, "identifier"),
    (b"\x10\0\0\0ET12" + b"\0" * 8, "past the end"),
])
def test_rejects_garbage(bad, needle):
    with pytest.raises(PteFormatError, match=needle):
        read_program(bad)


def _mutations(data: bytes, rng: random.Random, n: int):
    size = len(data)
    hot = [0, 4, 8, 12, 16, 24, 32]  # root offset, identifier, extended header
    for _ in range(n):
        kind = rng.randrange(6)
        buf = bytearray(data)
        if kind == 0:
            yield bytes(buf[: rng.randrange(size)])
            continue
        if kind == 1:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(size)] = rng.randrange(256)
        elif kind == 2:  # a plausible-looking but wrong 32-bit offset/length
            at = rng.randrange(0, size - 4) & ~3
            struct.pack_into("<I", buf, at, rng.choice(
                [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, size, size * 2, rng.randrange(1 << 32)]))
        elif kind == 3:
            at = rng.choice(hot)
            struct.pack_into("<I", buf, at, rng.randrange(1 << 32))
        elif kind == 4:  # zero a run of bytes
            at = rng.randrange(size)
            buf[at: at + rng.randint(1, 64)] = bytes(min(64, size - at))[: rng.randint(1, 64)]
        else:  # 64-bit fields (segment offsets/sizes, constant offsets)
            at = rng.randrange(0, size - 8) & ~7
            struct.pack_into("<Q", buf, at, rng.choice(
                [(1 << 64) - 1, 1 << 40, rng.randrange(1 << 64)]))
        yield bytes(buf)


def test_mutations_raise_only_pte_format_error():
    """At least 2,000 seeded corruptions over every fixture: parse or PteFormatError (or
    ExternalDataError: a corrupted key reads as one kept in a .ptd file)."""
    rng = random.Random(20261130)
    programs = [p.read_bytes() for p in PROGRAMS]
    assert programs
    per = max(1, -(-2000 // len(programs)))
    outcomes = {"parsed": 0, "rejected": 0}
    for data in programs:
        for bad in _mutations(data, rng, per):
            try:
                read_program(bad)
                outcomes["parsed"] += 1
            except (PteFormatError, ExternalDataError):
                outcomes["rejected"] += 1
    assert sum(outcomes.values()) >= 2000
    assert outcomes["rejected"] > 0.2 * sum(outcomes.values()), outcomes


def test_inline_and_segment_delegates_read_alike():
    inline = read_program((FIXTURES / "op_relu_inline.pte").read_bytes()).method("forward")
    segment = read_program((FIXTURES / "op_relu.pte").read_bytes()).method("forward")
    assert inline.delegate_calls[0].inline and not segment.delegate_calls[0].inline
    assert inline.graph.op_histogram() == segment.graph.op_histogram()
    assert [inline.graph.values[i] for i in inline.input_value_ids()] == \
        [segment.graph.values[i] for i in segment.input_value_ids()]


def test_a_method_that_is_not_there_is_an_input_error():
    from webpte.errors import InputError

    prog = read_program((FIXTURES / "op_catalog" / "add__regular_3d.pte").read_bytes())
    with pytest.raises(InputError,
                       match=r"program has no method 'forw\\x01'; it has \['forward'\]"):
        prog.method("forw\x01")
