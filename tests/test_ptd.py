"""External data files (`.ptd`): the FlatTensor reader, programs whose constants live in them
(program constants keyed by name, delegate constants keyed by sha256, sharded over two
files) on the device and on the numpy interpreter against eager PyTorch, and the typed
errors of a missing, wrong or malformed data file.

Fixtures: tests/fixtures/ptd, made by tools/export_ptd.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import webpte
from test_semantics import check_outputs
from webpte.cli import main
from webpte.errors import ExternalDataError, PlanError
from webpte.native.executor import _file_range
from webpte.plan.model import Plan
from webpte.program import plan_method
from webpte.pte import open_source, read_data_file, read_program
from webpte.web_glue import RangeSource

PTD = Path(__file__).parent / "fixtures" / "ptd"
ROUTES = {"program": ["program.ptd"], "delegate": ["delegate_0.ptd", "delegate_1.ptd"]}


def _files(route: str) -> list[Path]:
    return [PTD / f for f in ROUTES[route]]


def _reference():
    z = np.load(PTD / "ptd.npz")
    return [z["input_0"]], [z["output_0"]]


# -- tier 0: the reader and the plan ------------------------------------------------------

def test_reader_gives_each_key_its_range_and_layout():
    f = read_data_file(open_source(PTD / "program.ptd"), "program.ptd")
    assert set(f.entries) == {"fc.weight", "fc.bias", "scale"}
    w = f.entries["fc.weight"]
    assert (w.dtype, w.sizes, w.nbytes) == ("float32", (5, 7), 140)
    raw = (PTD / "program.ptd").read_bytes()
    assert all(e.offset + e.nbytes <= len(raw) for e in f.entries.values())
    # The bytes at the range are the weight's: the fixture's eager output is relu(x W^T + b) s.
    x, (y,) = _reference()
    get = {k: np.frombuffer(raw[e.offset: e.offset + e.nbytes], np.float32).reshape(e.sizes)
           for k, e in f.entries.items()}
    want = np.maximum(x[0] @ get["fc.weight"].T + get["fc.bias"], 0) * get["scale"]
    np.testing.assert_allclose(want, y, rtol=1e-5, atol=1e-6)


def test_reader_reads_only_the_header_and_flatbuffer():
    raw = (PTD / "delegate_0.ptd").read_bytes()
    src = RangeSource(len(raw), lambda a, b: raw[a:b])
    f = read_data_file(src, "delegate_0.ptd")
    assert f.entries
    data = min(e.offset for e in f.entries.values())
    assert src.bytes_read <= data, "the reader touched constant bytes"


def test_delegate_keys_are_the_sha256_of_their_bytes():
    import hashlib

    for name in ROUTES["delegate"]:
        raw = (PTD / name).read_bytes()
        for key, e in read_data_file(raw, name).entries.items():
            assert key == hashlib.sha256(raw[e.offset: e.offset + e.nbytes]).hexdigest()
            assert e.dtype is None


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_plan_points_each_constant_at_its_file(route):
    files = [read_data_file(open_source(p), p.name) for p in _files(route)]
    plan = plan_method(read_program(open_source(PTD / f"{route}.pte"), files))
    inits = [b.init for b in plan.buffers if b.init and b.init["kind"] == "file"]
    assert inits and all(i.get("file", 0) >= 1 for i in inits)
    assert {i["file"] for i in inits} == set(range(1, len(files) + 1))
    for i in inits:
        f = files[i["file"] - 1]
        assert any((e.offset, e.nbytes) == (i["offset"], i["nbytes"]) for e in f.entries.values())
    assert Plan.from_json(plan.to_json()).to_json() == plan.to_json()


def test_plan_json_refuses_a_bad_file_index():
    plan = plan_method(read_program(open_source(PTD / "program.pte"),
                                    [read_data_file(open_source(PTD / "program.ptd"), "p")]))
    doc = json.loads(plan.to_json())
    b = next(b for b in doc["buffers"] if b.get("init") and b["init"]["kind"] == "file")
    for bad in (-1, 1.0, "1"):
        b["init"]["file"] = bad
        with pytest.raises(PlanError, match="file range"):
            Plan.from_json(json.dumps(doc))


# -- running ---------------------------------------------------------------------------------

@pytest.fixture(params=["webgpu", "reference"])
def backend(request):
    if request.param == "webgpu":
        request.getfixturevalue("gpu")
    return request.param


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_external_constants_match_eager(route, backend):
    ins, want = _reference()
    prog = webpte.load(PTD / f"{route}.pte", backend=backend, data=_files(route), poison=True)
    check_outputs(prog.run(*ins), want, route)


def test_data_files_as_bytes_in_any_order():
    ins, want = _reference()
    data = [p.read_bytes() for p in reversed(_files("delegate"))]
    prog = webpte.load((PTD / "delegate.pte").read_bytes(), backend="reference", data=data)
    check_outputs(prog.run(*ins), want, "delegate, shards reversed")


# -- typed errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("route", sorted(ROUTES))
def test_no_data_file_names_the_key(route):
    with pytest.raises(ExternalDataError, match="none was given") as e:
        webpte.load(PTD / f"{route}.pte", backend="reference")
    assert e.value.key and e.value.key in str(e.value) and e.value.file is None
    assert "malformed" not in str(e.value)


def test_a_missing_shard_names_the_key_and_the_files_given():
    with pytest.raises(ExternalDataError, match="delegate_1.ptd") as e:
        webpte.load(PTD / "delegate.pte", backend="reference", data=[PTD / "delegate_1.ptd"])
    assert e.value.key in read_data_file((PTD / "delegate_0.ptd").read_bytes(), "x").entries


def test_another_programs_data_file_names_the_key_and_file():
    # Same keys, other tensors: fc.weight is f32[6, 7] in other.ptd.
    with pytest.raises(ExternalDataError, match="other.ptd") as e:
        webpte.load(PTD / "program.pte", backend="reference", data=[PTD / "other.ptd"])
    assert e.value.key == "fc.weight" and e.value.file.endswith("other.ptd")
    # The delegate's keys are not in the program's file at all.
    with pytest.raises(ExternalDataError, match="none of the data files") as e:
        webpte.load(PTD / "delegate.pte", backend="reference", data=[PTD / "program.ptd"])


def test_a_file_that_is_no_ptd_is_named():
    for bad in (PTD / "program.pte", PTD / "ptd.npz"):
        with pytest.raises(ExternalDataError, match="not a well-formed .ptd") as e:
            webpte.load(PTD / "program.pte", backend="reference", data=[bad])
        assert e.value.file == str(bad)
    raw = (PTD / "program.ptd").read_bytes()
    with pytest.raises(ExternalDataError, match="truncated.ptd"):
        read_data_file(raw[:300], "truncated.ptd")
    with pytest.raises(ExternalDataError, match="no data file at"):
        webpte.load(PTD / "program.pte", backend="reference", data=[PTD / "absent.ptd"])


def test_a_key_in_two_files_is_refused():
    with pytest.raises(ExternalDataError, match="both hold"):
        webpte.load(PTD / "program.pte", backend="reference",
                    data=[PTD / "program.ptd", PTD / "program.ptd"])


def test_an_executor_without_the_data_file_says_so():
    with pytest.raises(ExternalDataError, match="data file 2"):
        _file_range([b"pte", b"ptd"], {"offset": 0, "nbytes": 1, "file": 2}, "w")
    with pytest.raises(PlanError, match="same files"):
        _file_range([b"pte", b"ptd"], {"offset": 2, "nbytes": 4, "file": 1}, "w")


# -- the command line --------------------------------------------------------------------------

def test_cli_run_and_inspect_take_data_files(capsys):
    files = [a for f in _files("delegate") for a in ("--data", str(f))]
    assert main(["run", str(PTD / "delegate.pte"), "--backend", "reference", "--inputs",
                 str(PTD / "ptd.npz"), "--tolerance", "1e-5", *files]) == 0
    capsys.readouterr()
    assert main(["inspect", str(PTD / "program.pte"), "--data", str(PTD / "program.ptd")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["keys"] for f in out["data_files"]] == [3]
    assert out["methods"]["forward"]["policy"]["ok"]
    assert main(["inspect", str(PTD / "program.pte")]) == 2
    assert "'fc.weight'" in capsys.readouterr().err


# -- model folders ------------------------------------------------------------------------------

def _folder(tmp_path, **meta) -> Path:
    """A webpte model folder whose 'decoder' is the program fixture, with its .ptd listed."""
    import hashlib
    import shutil

    for name in ("program.pte", "program.ptd", "delegate_0.ptd"):
        shutil.copy(PTD / name, tmp_path / name)
    for name in ("e.bin", "s.bin", "tok/tokenizer.json", "tok/tokenizer_config.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"{}")
    digest = hashlib.sha256((PTD / "program.ptd").read_bytes()).hexdigest()
    (tmp_path / "webpte_model.json").write_text(json.dumps({
        "format": "webpte-model/1", "decoder": "program.pte", "embed_tokens": "e.bin",
        "embed_scales": "s.bin", "tokenizer": "tok", "decoder_data": ["program.ptd"],
        "sha256": {"program.ptd": digest}} | meta))
    return tmp_path


def test_a_model_folder_lists_its_programs_data_files(tmp_path):
    from webpte.host.files import folder_manifest, resolve_model_folder

    files = resolve_model_folder(_folder(tmp_path))
    assert files.decoder_data == [tmp_path / "program.ptd"] and files.vision_data == []
    # What the page fetches: the .ptd with its role and pinned sha256, like the .pte.
    meta = json.loads((tmp_path / "webpte_model.json").read_text())
    specs = {f["name"]: f for f in folder_manifest("webpte_model.json", meta)["files"]}
    assert specs["program.ptd"]["role"] == "decoder_data"
    assert specs["program.ptd"]["sha256"] == meta["sha256"]["program.ptd"]
    # The decoder program with the folder's data files is the fixture's program.
    ins, want = _reference()
    prog = webpte.load(files.decoder, backend="reference", data=files.decoder_data)
    check_outputs(prog.run(*ins), want, "model folder decoder")


def test_a_model_folders_data_files_are_checked(tmp_path):
    from webpte.host.files import ModelFolderError, resolve_model_folder

    with pytest.raises(ModelFolderError) as e:
        resolve_model_folder(_folder(tmp_path, decoder_data=["program.ptd", "gone.ptd"],
                                     vision_data=["delegate_0.ptd"]))
    text = str(e.value)
    assert "missing gone.ptd (decoder_data)" in text
    assert "lists 'vision_data' but names no 'vision' program" in text
    folder = _folder(tmp_path)
    (folder / "program.ptd").write_bytes((PTD / "other.ptd").read_bytes())
    with pytest.raises(ModelFolderError, match="program.ptd does not match its sha256"):
        resolve_model_folder(folder)
    for bad in ("program.ptd", ["../program.ptd"]):
        with pytest.raises(ModelFolderError, match="decoder_data"):
            resolve_model_folder(_folder(tmp_path, decoder_data=bad))


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_weights_split_past_a_binding_keep_their_file(route):
    files = [read_data_file(open_source(p), p.name) for p in _files(route)]
    prog = read_program(open_source(PTD / f"{route}.pte"), files)
    # 112 bytes: four rows of the 7-wide f32 weight per block.
    plan = plan_method(prog, limits={"max_storage_buffer_binding_size": 112})
    inits = [b.init for b in plan.buffers if b.init and b.init["kind"] == "file"]
    assert all(i.get("file", 0) >= 1 for i in inits), inits
    for i in inits:
        size = files[i["file"] - 1].size
        assert i["offset"] + i["nbytes"] <= size


def test_split_weights_from_a_data_file_match_eager(gpu):
    ins, want = _reference()
    prog = webpte.load(PTD / "delegate.pte", data=_files("delegate"), poison=True,
                       limits={"max_storage_buffer_binding_size": 112})
    assert len(prog.plan.dispatches) > len(plan_method(read_program(
        open_source(PTD / "delegate.pte"),
        [read_data_file(open_source(p), p.name) for p in _files("delegate")])).dispatches)
    check_outputs(prog.run(*ins), want, "split weight")


# -- the page's planner entry points -------------------------------------------------------------

def _range_source(path: Path) -> RangeSource:
    raw = path.read_bytes()
    return RangeSource(len(raw), lambda a, b: raw[a:b], path.name)


def test_page_planner_reads_data_files_by_ranges():
    from webpte.web_glue import plan_program, preflight_program

    data = [_range_source(p) for p in _files("delegate")]
    out = json.loads(plan_program(_range_source(PTD / "delegate.pte"), data=data))
    plan = json.loads(out["plan"]) if isinstance(out["plan"], str) else out["plan"]
    assert {b["init"].get("file") for b in plan["buffers"]
            if b.get("init") and b["init"]["kind"] == "file"} == {1, 2}
    # Only the data files' headers and flatbuffers crossed into Python.
    for src, path in zip(data, _files("delegate"), strict=True):
        first = min(e.offset for e in read_data_file(path.read_bytes(), "x").entries.values())
        assert 0 < src.bytes_read <= first
    pre = json.loads(preflight_program(_range_source(PTD / "program.pte"),
                                       data=[_range_source(PTD / "program.ptd")]))
    assert "needs" in pre["ok"]


def test_page_planner_errors_carry_key_and_file():
    from webpte.web_glue import plan_program

    out = json.loads(plan_program(_range_source(PTD / "program.pte"),
                                  data=[_range_source(PTD / "other.ptd")]))
    assert out["error"]["name"] == "ExternalDataError"
    assert (out["error"]["key"], out["error"]["file"]) == ("fc.weight", "other.ptd")
    out = json.loads(plan_program(_range_source(PTD / "program.pte")))
    assert (out["error"]["key"], out["error"]["file"]) == ("fc.weight", None)
