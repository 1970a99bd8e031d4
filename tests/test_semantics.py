"""ExecuTorch's memory model: programs exported the ordinary ways (portable kernels only, the
WebGPU partitioner, the partitioner with alias_buffer_mutations) against eager PyTorch, on the
device and on the numpy interpreter; and the aliasing pass on hand-made graphs.

Fixtures: tests/fixtures/semantics, made by tools/export_semantics.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import webpte
from webpte.errors import UnsupportedOpError
from webpte.planner.aliasing import Slot, resolve_aliases
from webpte.pte.graph import DType, OpCall, TensorValue, ValueList

SEMANTICS = Path(__file__).parent / "fixtures" / "semantics"
NAMES = sorted(p.stem for p in SEMANTICS.glob("*.pte"))


def _calls(npz) -> list[tuple[list, list]]:
    """[(inputs, reference outputs)] of a fixture: one call, or call{i}_ sequences."""
    if "input_0" in npz:
        prefixes = [""]
    else:
        prefixes = sorted({k.split("_", 1)[0] + "_" for k in npz.files},
                          key=lambda p: int(p[4:-1]))
    calls = []
    for p in prefixes:
        ins = [npz[f"{p}input_{j}"] for j in range(sum(k.startswith(f"{p}input_")
                                                        for k in npz.files))]
        outs = [npz[f"{p}output_{j}"] for j in range(sum(k.startswith(f"{p}output_")
                                                          for k in npz.files))]
        calls.append((ins, outs))
    return calls


def check_outputs(got: list, want: list, what: str) -> None:
    """Shape, dtype kind, then values: floats within 1e-5 + 1e-4*|ref|, ints and bools exact."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the reference has {len(want)}"
    for j, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what} output {j}: shape {g.shape}, want {w.shape}"
        if w.dtype.kind == "f":
            assert g.dtype.kind == "f", f"{what} output {j}: dtype {g.dtype}, want {w.dtype}"
            bad = ~(np.abs(g - w) <= 1e-5 + 1e-4 * np.abs(w))
        else:
            bad = g.astype(np.int64) != w.astype(np.int64)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            pytest.fail(f"{what} output {j}: {int(bad.sum())} of {w.size} values wrong; "
                        f"first at {first}: got {g[first]}, want {w[first]}")


@pytest.fixture(params=["webgpu", "reference"])
def backend(request):
    if request.param == "webgpu":
        request.getfixturevalue("gpu")
    return request.param


@pytest.mark.parametrize("name", NAMES)
def test_semantics_fixture_matches_eager(name, backend):
    calls = _calls(np.load(SEMANTICS / f"{name}.npz"))
    prog = webpte.load(SEMANTICS / f"{name}.pte", backend=backend)
    for i, (ins, want) in enumerate(calls):
        check_outputs(prog.run(*ins), want, f"{name} call {i}")


def test_fixture_set_covers_the_three_export_ways():
    assert {n.split("_", 1)[0] for n in NAMES} == {"portable", "webgpu", "aliased"}


def test_check_outputs_fails_on_a_wrong_value_shape_or_count():
    want = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    check_outputs([want[0].copy()], want, "same")
    bad_value = want[0].copy()
    bad_value[1, 2] += 0.01
    for got in ([bad_value], [want[0].reshape(3, 2)], [], [np.full((2, 3), np.nan, np.float32)]):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check_outputs(got, want, "bad")


# The aliasing pass on hand-made graphs -----------------------------------------------------

def _f32(*dims):
    return TensorValue(DType.FLOAT32, dims)


def test_a_view_sharing_its_inputs_slot_reads_the_input():
    # v0 input [2,3] at 0; v1 [6] at 0 (a view: nothing writes it); relu(v1) -> v2 at 64.
    values = [_f32(2, 3), _f32(6), _f32(6)]
    slots = {0: Slot(1, 0, 24), 1: Slot(1, 0, 24), 2: Slot(1, 64, 24)}
    chain, outs = resolve_aliases(values, [OpCall("aten.relu.default", (1, 2))], [0], [2],
                                  slots)
    assert [op.name for op in chain] == ["aten.view_copy.default", "aten.relu.default"]
    view = chain[0].args[-1]
    assert chain[0].args[0] == 0 and values[chain[0].args[1]] == (6,)
    assert chain[1].args == (view, 2) and outs == [2]


def test_an_output_left_in_a_reused_slot_is_the_last_write_there():
    # relu(v0) -> v1 at 24; neg(v1) -> v2 at 0 (v0's slot, v0 dead); the output v3 is a view
    # at v2's range that nothing writes: it reads v2.
    values = [_f32(4), _f32(4), _f32(4), _f32(2, 2)]
    slots = {0: Slot(1, 0, 16), 1: Slot(1, 24, 16), 2: Slot(1, 0, 16), 3: Slot(1, 0, 16)}
    chain, outs = resolve_aliases(values, [OpCall("aten.relu.default", (0, 1)),
                                           OpCall("aten.neg.default", (1, 2))], [0], [3],
                                  slots)
    assert chain[-1].name == "aten.view_copy.default" and chain[-1].args[0] == 2
    assert outs == [chain[-1].args[-1]]


def test_unwritten_and_empty_tensors_keep_their_values():
    # v1 is a buffer read before anything writes its range (state); v2 is empty and
    # overlaps v0 without clobbering it.
    values = [_f32(4), _f32(4), _f32(0), _f32(4), ValueList((3, 2))]
    slots = {0: Slot(1, 0, 16), 1: Slot(1, 16, 16), 2: Slot(1, 0, 0), 3: Slot(1, 32, 16)}
    chain = [OpCall("aten.add.Tensor", (0, 1, 4))]
    new, outs = resolve_aliases(values, list(chain), [0], [3], slots)
    assert new == chain and outs == [3]


def test_a_partial_overlap_is_refused_by_name():
    values = [_f32(4), _f32(2), _f32(2)]
    slots = {0: Slot(1, 0, 16), 1: Slot(1, 8, 8), 2: Slot(1, 32, 8)}
    with pytest.raises(UnsupportedOpError, match="value 1 .* last written as value 0"):
        resolve_aliases(values, [OpCall("aten.relu.default", (1, 2))], [0], [2], slots)


def test_a_view_of_another_dtype_is_refused_by_name():
    values = [_f32(4), TensorValue(DType.INT32, (4,)), _f32(4)]
    slots = {0: Slot(1, 0, 16), 1: Slot(1, 0, 16), 2: Slot(1, 32, 16)}
    with pytest.raises(UnsupportedOpError, match="dtype"):
        resolve_aliases(values, [OpCall("aten.abs.default", (1, 2))], [0], [2], slots)


def test_a_multi_output_kernels_out_tensors_are_written_not_read():
    # max.dim_max's own form passes (x, dim, keepdim, values, indices, [values, indices]):
    # its values land in part of a dead tensor's slot, which is no read of that tensor.
    values = [_f32(2, 4), _f32(2, 4), 1, False, _f32(2), TensorValue(DType.INT64, (2,)),
              ValueList((4, 5))]
    slots = {0: Slot(1, 64, 32), 1: Slot(1, 0, 32), 4: Slot(1, 8, 8), 5: Slot(1, 96, 16)}
    chain = [OpCall("aten.relu.default", (0, 1)), OpCall("aten.max.dim_max", (1, 2, 3, 4, 5, 6))]
    new, outs = resolve_aliases(values, list(chain), [0], [4, 5], slots)
    assert [op.name for op in new] == ["aten.relu.default", "aten.max.dim_max"] and outs == [4, 5]
