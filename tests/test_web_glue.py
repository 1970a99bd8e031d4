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
from webpte.web_glue import RangeSource, autotune_candidates, plan_program

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
    assert src.bytes_read == 6 + 5 + 1      # [-1] lies in [45:50]: distinct bytes count once
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
    assert out["bytes_read"] == len({i for a, b in reads for i in range(a, b)})
    if consts:  # without constant bytes (e.g. an inline delegate of relu) there is nothing to skip
        assert out["bytes_read"] < len(data)


def test_fingerprint_names_the_program_by_what_the_reader_read():
    """The page's autotune keys its choice by plan_program's fingerprint: the same for every
    planner hint, another for another program, and blind to the weight bytes the reader
    never reads (the choice depends on shapes, not values)."""
    data = (FIXTURES / "decoder_q8_tiny.pte").read_bytes()

    def answer(b, features=()):
        return json.loads(plan_program(_source(b, []), "forward", list(features)))

    base = answer(data)
    assert len(base["fingerprint"]) == 64
    for hint in (["q8_decode:skinny8"], ["q8_decode:skinny", "q8_f32:off"]):
        out = answer(data, hint)
        assert out["fingerprint"] == base["fingerprint"]
    assert answer((FIXTURES / "decoder_q8_gemma3_tiny.pte").read_bytes())["fingerprint"] \
        != base["fingerprint"]
    const = max((b["init"] for b in base["plan"]["buffers"]
                 if b["init"] and b["init"]["kind"] == "file"), key=lambda i: i["nbytes"])
    other = bytearray(data)
    other[const["offset"]] ^= 0xFF     # another weight value: the same program to tune
    assert answer(bytes(other))["fingerprint"] == base["fingerprint"]
    # Planning reads nothing more into it: the fingerprint is taken once the reader is done.
    src = _source(data, [])
    assert json.loads(plan_program(src))["fingerprint"] == base["fingerprint"]
    taken = src.fingerprint()
    src[const["offset"]:const["offset"] + 4]
    assert src.fingerprint() == taken


def test_plan_program_fusion_option():
    """The page picks how much the planner fuses; an unknown name is an InputError."""
    data = (Path(__file__).parent / "fixtures" / "decoder_q8_tiny.pte").read_bytes()
    counts = {f: len(json.loads(plan_program(data, "forward", (), f))["plan"]["dispatches"])
              for f in ("none", "elementwise", "all")}
    assert counts["none"] > counts["elementwise"] > counts["all"], counts
    assert counts["none"] == len(plan_method(read_program(data), fusion="none").dispatches)
    bad = json.loads(plan_program(data, "forward", (), "most"))
    assert bad["error"]["name"] == "InputError" and "'most'" in bad["error"]["message"]


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


# The page's model path: manifest of a folder, and a conversation driven by the turn decisions.

SMOLLM2_CONFIG = {
    "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
    "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"}
VOCAB = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}


def _session(max_context=64, vocab=VOCAB):
    from webpte.web_glue import ChatSession

    manifest = json.dumps({"sink_token": "<|im_start|>", "stop_tokens": ["<|im_end|>"]})
    s = ChatSession(manifest, json.dumps(SMOLLM2_CONFIG), lambda t: vocab.get(t, -1), 4,
                    max_context)
    return s, json.loads(s.setup())


def _ok(answer):
    out = json.loads(answer)
    assert "ok" in out, out
    return out["ok"]


def _logits(best, n=10):
    return [0.5] * best + [2.0] + [0.5] * (n - best - 1)


def test_model_manifest_names_files_and_pins():
    from webpte.host.files import SMOLVLM_FILES
    from webpte.web_glue import model_manifest

    meta = {"format": "webpte-model/1", "name": "m", "decoder": "d.pte", "vision": None,
            "embed_tokens": "e.bin", "embed_scales": "s.bin", "tokenizer": "tok",
            "stop_tokens": ["<|im_end|>"], "sha256": {"d.pte": "ab" * 32}}
    out = _ok(model_manifest("webpte_model.json", json.dumps(meta)))
    assert out["layout"] == "webpte" and out["stop_tokens"] == ["<|im_end|>"]
    files = {f["name"]: f for f in out["files"]}
    assert set(files) == {"webpte_model.json", "d.pte", "e.bin", "s.bin", "tok/tokenizer.json",
                          "tok/tokenizer_config.json"}
    assert files["d.pte"]["sha256"] == "ab" * 32 and files["e.bin"]["sha256"] is None
    assert files["d.pte"]["role"] == "decoder"
    vlm = _ok(model_manifest("vlm_meta.json", None))
    assert vlm["layout"] == "smolvlm"
    assert {f["name"]: (f["size"], f["sha256"]) for f in vlm["files"]} == SMOLVLM_FILES
    bad = json.loads(model_manifest("webpte_model.json", json.dumps({"format": "x"})))["error"]
    assert bad["name"] == "ModelFolderError" and len(bad["problems"]) == 4
    assert json.loads(model_manifest("webpte_model.json", "{"))["error"]["name"] == "InputError"


def test_chat_session_follows_the_turn_decisions():
    s, facts = _session()
    assert facts["ok"] == {"sink_id": 1, "stop_ids": [2], "image_id": None, "image_rows": 64}
    assert _ok(s.render("Hi")) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    ids = [1, 5, 6, 7, 8, 9]
    begun = _ok(s.begin("Hi", False, ids, json.dumps({"max_new_tokens": 3})))
    assert (begun["reuse"], begun["starts"], begun["images"]) == (0, [0, 2], [])
    _ok(s.prefilled())
    assert _ok(s.step(_logits(4))) == {"token": 4, "start": 3}   # window 3..6 feeds position 6
    assert _ok(s.step(_logits(3))) == {"token": 3, "start": 4}
    assert s.cached == ids + [4]
    assert _ok(s.step(_logits(2))) == {"stop": "stop_token"}
    _ok(s.finish(" ab "))
    assert s.turns[-1].text == "ab" and s.cached == ids + [4, 3]
    # a follow-up reuses the common prefix
    follow = ids + [4, 3, 2, 7, 7, 7]
    assert _ok(s.begin("More", False, follow, "{}"))["reuse"] == 8
    _ok(s.finish(""))                 # stopped before its prompt ran: nothing joins
    assert len(s.turns) == 2 and s.cached == ids + [4, 3]


def test_chat_session_errors_are_typed_data():
    s, _ = _session(max_context=8)
    full = json.loads(s.begin("Hi", False, [1] + [5] * 8, "{}"))["error"]
    assert full["name"] == "ContextFullError" and "reset" in full["message"]
    sink = json.loads(s.begin("Hi", False, [5, 6, 7, 8], "{}"))["error"]
    assert sink["name"] == "InputError" and "attention-sink" in sink["message"]
    bad = json.loads(s.begin("Hi", False, [1, 5, 6, 7], json.dumps({"top_p": 0})))["error"]
    assert bad["name"] == "InputError" and "top_p" in bad["message"]
    _ok(s.begin("Hi", False, [1, 5, 6, 7], json.dumps({"max_new_tokens": 9})))
    _ok(s.prefilled())
    for _ in range(4):
        _ok(s.step(_logits(5)))
    assert _ok(s.step(_logits(5))) == {"stop": "context_full"}
    _, no_sink = _session(vocab={"<|im_end|>": 2})
    err = no_sink["error"]
    assert err["name"] == "InputError" and "<|im_start|>" in err["message"]


def test_chat_session_samples_like_the_native_sampler():
    from webpte.host.sampling import Sampler, SamplingOptions

    s, _ = _session()
    opts = {"temperature": 0.8, "top_k": 5, "top_p": 0.9, "repetition_penalty": 1.3, "seed": 7}
    ids = [1, 5, 6, 7]
    _ok(s.begin("Hi", False, ids, json.dumps({**opts, "max_new_tokens": 6})))
    _ok(s.prefilled())
    ref = Sampler(SamplingOptions(**opts))
    history = list(ids)
    rows = [[((i * 7 + j * 3) % 11) / 3 for j in range(12)] for i in range(6)]
    for row in rows:
        got = _ok(s.step(row))
        want = ref(row, history)
        if want == 2:
            assert got == {"stop": "stop_token"}
            break
        assert got["token"] == want
        history.append(want)


def test_page_python_needs_no_numpy_wgpu_or_tokenizers():
    import subprocess
    import sys

    script = r"""
import importlib.machinery, json, sys
_find = importlib.machinery.PathFinder.find_spec
HIDDEN = ("numpy", "wgpu", "tokenizers", "PIL")
def hidden_find(name, path=None, target=None):
    return None if name.split(".")[0] in HIDDEN else _find(name, path, target)
importlib.machinery.PathFinder.find_spec = hidden_find
for mod in HIDDEN:
    sys.modules[mod] = None
from webpte.web_glue import ChatSession, model_manifest
vocab = {"<|im_start|>": 1, "<|im_end|>": 2}
s = ChatSession(json.dumps({"sink_token": "<|im_start|>", "stop_tokens": ["<|im_end|>"]}),
                json.dumps({"chat_template": "{{ messages[0]['content'] }}"}),
                lambda t: vocab.get(t, -1), 4, 64)
assert "ok" in json.loads(s.setup())
assert json.loads(s.render("hi"))["ok"] == "hi"
assert "ok" in json.loads(model_manifest("vlm_meta.json", None))
print("page python ok")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "page python ok" in r.stdout


def test_the_page_autotune_measures_the_native_candidates():
    """web/autotune.js gets its candidates from webpte.autotune: planner hints that plan, per
    adapter kind, the decode variants the native autotune times."""
    from webpte.autotune import CANDIDATES
    from webpte.planner.hints import variant_features

    assert "q8_decode:skinny+q8_f32:off" in json.loads(autotune_candidates("CPU"))["ok"]["hints"]
    for kind, want in (("CPU", CANDIDATES["CPU"]), ("GPU", CANDIDATES["GPU"]),
                       ("DiscreteGPU", CANDIDATES["GPU"])):
        spec = json.loads(autotune_candidates(kind))["ok"]
        assert spec["hints"] == ["+".join(sorted(variant_features((), v))) for v in want]
        assert all(h.split("+")[0].startswith("q8_decode:") for h in spec["hints"])
        assert "linear_q8_dual" in spec["families"] and spec["calls"] >= 1
    data = (FIXTURES / "decoder_q8_tiny.pte").read_bytes()
    names = {h: {k["name"].rsplit("_", 1)[0] for k in json.loads(plan_program(
        data, "forward", ["adapter_type:GPU", h]))["plan"]["kernels"]}
        for h in json.loads(autotune_candidates("GPU"))["ok"]["hints"]}
    assert "linear_q8_splitk" in names["q8_decode:splitk"]
    assert "linear_q8_splitk" not in names["q8_decode:skinny"]   # an explicit hint wins
