"""The planner's output is pinned: the sha256 of the plan JSON of every method of every
committed fixture program, for each adapter type's hints (tests/fixtures/plan_hashes.json,
written by tools/plan_hashes.py). A planner change meant to keep behaviour keeps every hash;
one meant to change plans rewrites the table in the same commit
(`python tools/plan_hashes.py --model ~/.cache/webpte/models/smollm2-135m-instruct-q8
--write tests/fixtures/plan_hashes.json`), so the diff shows which plans it changed.

The built SmolLM2 decoder is compared too where the build made the same program file."""

import importlib.util
import json
from pathlib import Path

import pytest

from webpte.build.smollm2 import default_folder

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "fixtures" / "plan_hashes.json"
_spec = importlib.util.spec_from_file_location("plan_hashes", ROOT / "tools" / "plan_hashes.py")
plan_hashes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plan_hashes)


def _want() -> dict:
    return json.loads(TABLE.read_text())


@pytest.fixture(scope="module")
def fixture_table() -> dict:
    return plan_hashes.table([])


def test_every_fixture_program_is_in_the_table(fixture_table):
    missing = sorted(set(fixture_table) - set(_want()))
    assert not missing, f"not in {TABLE.name}: {missing}"


def test_fixture_plans_are_unchanged(fixture_table):
    want = _want()
    got = fixture_table
    changed_files = [k for k in got if k in want and got[k]["file"] != want[k]["file"]]
    assert not changed_files, f"re-exported without rewriting {TABLE.name}: {changed_files}"
    diff = plan_hashes.differences({k: v for k, v in want.items() if k in got}, got)
    assert not diff, "plans changed:\n" + "\n".join(diff)
    assert sum(len(v) - 1 for v in got.values()) >= 500  # every method, both hints


def test_smollm2_decoder_plans_are_unchanged():
    folder = default_folder()
    key = f"{folder.name}/decoder_q8.pte"
    if not (folder / "decoder_q8.pte").is_file():
        pytest.skip(f"no built model at {folder} (make model)")
    got = plan_hashes.table([folder])[key]
    want = _want()[key]
    if got["file"] != want["file"]:
        pytest.skip("the built decoder is another program file than the one the table pins")
    assert got == want, "plans changed:\n" + "\n".join(
        plan_hashes.differences({key: want}, {key: got}))


def test_a_changed_plan_is_named():
    want = {"a.pte": {"file": "f", "forward adapter_type:CPU": "x"}}
    got = {"a.pte": {"file": "f", "forward adapter_type:CPU": "y"}, "b.pte": {"file": "g"}}
    assert plan_hashes.differences(want, got) == ["a.pte [forward adapter_type:CPU]: x -> y",
                                                  "b.pte: new"]
