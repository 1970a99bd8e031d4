"""Tier 0: the page's Python entry point (webpte.web_glue), run natively.

In the page the same code runs in Pyodide (tests/browser); here we check what it promises:
the plan equals plan_method's, errors come back as data named like their class, and the
reader asks only for byte ranges outside the constants (weights never cross into Python).
"""

import json
from pathlib import Path

import pytest

from webpte.program import plan_method
from webpte.pte import read_program
from webpte.web_glue import RangeSource, plan_program

FIXTURES = Path(__file__).parent / "fixtures"
PROGRAMS = sorted(FIXTURES.glob("*.pte"))


def _source(data: bytes, reads: list):
    def read(start, stop):
        reads.append((start, stop))
        return data[start:stop]
    return RangeSource(len(data), read)


def test_range_source_slices_like_bytes():
    data = bytes(range(50))
    src = _source(data, [])
    assert len(src) == 50
    assert src[3:9] == data[3:9] and src[45:99] == data[45:] and src[9:3] == b""
    assert src[-1] == data[-1] and src[0] == 0
    assert src.bytes_read == 6 + 5 + 1 + 1
    with pytest.raises(ValueError):
        src[::2]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_plan_program_reads_no_constants(path):
    data = path.read_bytes()
    reads: list = []
    out = json.loads(plan_program(_source(data, reads)))
    if "error" in out:
        assert out["error"]["name"] == "UnsupportedOpError", out["error"]
        pytest.skip(out["error"]["message"])
    assert json.dumps(out["plan"], separators=(",", ":")) == \
        plan_method(read_program(data)).to_json()
    consts = [(b["init"]["offset"], b["init"]["offset"] + b["init"]["nbytes"])
              for b in out["plan"]["buffers"] if b["init"] and b["init"]["kind"] == "file"]
    for a, b in reads:
        for c, d in consts:
            assert b <= c or a >= d, f"read {a}..{b} overlaps constant bytes {c}..{d}"
    assert out["bytes_read"] == sum(b - a for a, b in reads) < len(data)


def test_errors_come_back_as_data():
    bad = json.loads(plan_program(b"\0\0\0\0XXXX" + bytes(64)))
    assert bad["error"]["name"] == "PteFormatError"
    assert "file identifier" in bad["error"]["message"]
    data = PROGRAMS[0].read_bytes()
    missing = json.loads(plan_program(data, "no_such_method"))
    assert missing["error"]["name"] == "InputError"
    assert "no_such_method" in missing["error"]["message"]


@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem.startswith("decoder_")],
                         ids=lambda p: p.stem)
def test_decoder_position_input(path):
    out = json.loads(plan_program(path.read_bytes()))
    plan = out["plan"]
    index, rows = out["position_input"]
    assert plan["inputs"][index]["shape"] == [1] and plan["inputs"][index]["dtype"] == "int64"
    assert rows == plan["inputs"][1 - index]["shape"][1] and plan["max_context"] >= rows


@pytest.mark.parametrize("path", [p for p in PROGRAMS if "q8" in p.stem], ids=lambda p: p.stem)
def test_features_reach_the_planner(path):
    data = path.read_bytes()
    feats = ["packed_4x8_integer_dot_product"]
    out = json.loads(plan_program(data, "forward", feats))
    assert json.dumps(out["plan"], separators=(",", ":")) == \
        plan_method(read_program(data), "forward", frozenset(feats)).to_json()
