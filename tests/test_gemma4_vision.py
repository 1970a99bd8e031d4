"""The reduced Gemma 4 vision encoder (tools/export_gemma4_vision.py: ExecuTorch's own export
path around HF's Gemma4VisionModel + Gemma4MultimodalEmbedder) against eager PyTorch on every
call (images of four patch grids, two of them padded): the stock export, several delegates
with portable kernel calls between them (the padding `any`, the pooler's `max.dim`, the
mask's `index.Tensor`, ...) run by webpte as one plan, natively and on the numpy
interpreter; its two-pass int8 variant; and the fully delegated rewrite of the same maths
(one delegate, no kernel calls), checked against the stock module's eager outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from webpte.cli import _calls_from_npz
from webpte.program import inspect, load
from webpte.pte import open_source, read_program
from webpte.testing import rel_l2

FIXTURES = Path(__file__).parent / "fixtures" / "gemma4_vision"
PROGRAMS = sorted(FIXTURES.glob("*.pte"))
TOKENS, WIDTH = 4, 64   # soft tokens per image, the reduced Gemma 4 decoder's width


def tolerance(path: Path) -> float:
    """rel-L2 vs eager: 2e-3 for the two-pass int8 program (rounding ties differ), else 1e-4."""
    return 2e-3 if "q8" in path.stem else 1e-4


def _check_calls(prog, path: Path, backend: str) -> list[np.ndarray]:
    calls = _calls_from_npz(str(path.with_suffix(".npz")))
    masks = [expected[1] for _, expected in calls]
    assert any(not m.all() for m in masks) and any(m.all() for m in masks), \
        "the calls must include padded images (tokens without patches) and full ones"
    outs = []
    for i, (inputs, (embeds, mask)) in enumerate(calls):
        got, got_mask = prog.run(*inputs)
        assert got.shape == embeds.shape == (1, TOKENS, WIDTH) and got.dtype == np.float32
        err = rel_l2(got, embeds)
        assert err <= tolerance(path), f"{path.stem} [{backend}] call {i} rel-L2 {err:.2e}"
        assert got_mask.dtype == np.bool_ and np.array_equal(got_mask, mask), \
            f"{path.stem} [{backend}] call {i}: mask {got_mask} != eager {mask}"
        outs.append(got)
    return outs


def test_fixtures_exist():
    assert {p.stem for p in PROGRAMS} >= {"gemma4_vision_stock", "gemma4_vision_q8",
                                          "gemma4_vision_delegated"}
    assert all(p.with_suffix(".npz").exists() for p in PROGRAMS)
    assert all(p.stat().st_size < 2 << 20 for p in PROGRAMS)


def test_delegated_rewrite_is_checked_against_the_stock_module():
    """The rewrite's references are the stock module's eager outputs on the same calls."""
    stock = np.load(FIXTURES / "gemma4_vision_stock.npz")
    rewrite = np.load(FIXTURES / "gemma4_vision_delegated.npz")
    assert sorted(stock.files) == sorted(rewrite.files)
    for key in stock.files:
        assert np.array_equal(stock[key], rewrite[key]), key


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_matches_eager_on_the_numpy_interpreter(path):
    _check_calls(load(path, backend="reference"), path, "reference")


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_matches_eager_natively(gpu, path):
    prog = load(path)
    prog.executor.poison()
    native = _check_calls(prog, path, "webgpu")
    ref = load(path, backend="reference")
    for i, (inputs, _) in enumerate(_calls_from_npz(str(path.with_suffix(".npz")))):
        want = ref.run(*inputs)[0]
        assert rel_l2(native[i], want) <= tolerance(path), f"call {i}: GPU vs numpy"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_one_plan_for_every_delegate_and_kernel_call(path):
    m = read_program(open_source(path)).method("forward")
    fwd = inspect(path)["methods"]["forward"]
    assert fwd["unsupported_ops"] == [] and fwd["policy"]["ok"] is True
    assert fwd["runs_on"].startswith("device") and fwd["host_graph_breaks"] == []
    assert fwd["delegate_calls"] == len(m.delegate_calls)
    assert fwd["host_kernel_calls"] == len(m.kernel_calls)
    if "delegated" in path.stem:
        assert fwd["delegate_calls"] == 1 and fwd["host_kernel_calls"] == 0
        assert fwd["kernel_call_histogram"] == {}
        return
    assert fwd["delegate_calls"] > 1 and fwd["host_kernel_calls"] > 0
    # The calls that needed units of their own: the pooler's max and the mask lookup.
    assert {"aten::max.dim_max", "aten::index.Tensor_out"} <= set(fwd["kernel_call_histogram"])
