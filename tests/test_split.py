"""Weights past a binding (planner/split.py): split by output rows, results bit for bit the
unsplit plan's; limits="default" plans for and creates a device with WebGPU's defaults."""

from __future__ import annotations

import numpy as np
import pytest

import webpte
from conftest import FIXTURES
from webpte.errors import InputError, PlanError
from webpte.limits import DEFAULT_LIMITS, resolve_limits
from webpte.planner.split import split_large_weights
from webpte.program import method_parts
from webpte.pte import read_program

DECODER = FIXTURES / "decoder_q8_tiny"


def _graph():
    prog = read_program((DECODER.with_suffix(".pte")).read_bytes())
    return method_parts(prog.method("forward"))[0]


def test_only_weights_past_the_limit_are_split_into_row_blocks():
    graph = _graph()
    assert split_large_weights(graph) is graph   # nothing near 128 MiB
    split = split_large_weights(graph, 8192)     # the 256 x 64 head: two blocks of 128 rows
    heads = [op for op in split.chain if op.name == "et_vk.linear_q8ta_q8csw.default"
             and split.values[op.args[3]].dims[1] == 64 and split.values[op.args[3]].dims[0] == 128]
    assert len(heads) == 4                       # two passes of the two-pass linear, 2 blocks
    cats = [op for op in split.chain if op.name == "aten.cat.default"]
    assert len(cats) == 2
    with pytest.raises(PlanError, match="four rows do not fit"):
        split_large_weights(graph, 200)


def test_a_split_plan_binds_within_the_limit_and_gives_the_same_bits(gpu):
    calls = np.load(DECODER.with_suffix(".npz"))
    whole = webpte.load(DECODER.with_suffix(".pte"))
    split = webpte.load(DECODER.with_suffix(".pte"),
                        limits={"max_storage_buffer_binding_size": 8192})
    assert split.plan.limits["max_storage_buffer_binding_size"] <= 8192
    assert len(split.plan.dispatches) > len(whole.plan.dispatches)
    for c in range(7):
        ins = [calls[f"call{c}_input_{i}"] for i in range(2)]
        (a,), (b,) = whole.run(*ins), split.run(*ins)
        np.testing.assert_array_equal(a, b)


def test_limits_default_creates_the_device_with_webgpus_defaults(gpu):
    from webpte.native.device import device_limits

    have = device_limits(resolve_limits("default"))
    for name in ("max_storage_buffer_binding_size", "max_buffer_size",
                 "max_storage_buffers_per_shader_stage"):
        assert have[name] == DEFAULT_LIMITS[name]
    prog = webpte.load(FIXTURES / "op_add.pte", limits="default")
    assert prog.plan.limits["max_storage_buffer_binding_size"] <= DEFAULT_LIMITS[
        "max_storage_buffer_binding_size"]


def test_bad_limits_are_input_errors():
    for bad in ("huge", {"max_bogus": 4}, {"max_buffer_size": -1}, {"max_buffer_size": 1.5}):
        with pytest.raises(InputError):
            resolve_limits(bad)


def test_an_embedding_table_past_the_limit_is_split_by_rows(gpu):
    """13 x 6 f32 table (312 bytes) at a 160-byte binding: blocks of 4 rows, each gathering
    at its clamped indices, merged by where(index >= first row): eager's rows exactly."""
    name = FIXTURES / "semantics" / "portable_token_embedding"
    calls = np.load(name.with_suffix(".npz"))
    prog = webpte.load(name.with_suffix(".pte"), limits={"max_storage_buffer_binding_size": 160})
    ops = [d.op for d in prog.plan.dispatches]
    assert ops.count("aten.embedding.default") == 4 and ops.count("aten.where.self") == 3
    assert max(b.size for b in prog.plan.buffers) <= 160
    (out,) = prog.run(calls["input_0"])
    np.testing.assert_array_equal(out, calls["output_0"])


def _q4_graphs(rng):
    """A linear_q4gsw (bias, scales padded to 72 columns with NaN) and a linear_dq8ca_q4gsw
    (per-row qparams chosen in the graph), N = 70, K = 64, groups of 32: W is 2240 bytes."""
    from test_op_q4 import dq8ca_graph, q4gsw_operands
    from test_op_q4gsw import linear_graph, q4gsw_weights

    w, scales = q4gsw_weights(rng, 70, 64, 32)
    bias = rng.standard_normal(70).astype(np.float32)
    q4gsw = linear_graph(w, scales, 32, (5,), bias=bias)
    w, sums, scales = q4gsw_operands(rng, 70, 64, 32)
    return {"linear_q4gsw": q4gsw, "linear_dq8ca_q4gsw": dq8ca_graph(w, sums, scales, 32, (5,))}


@pytest.mark.parametrize("name", ["linear_q4gsw", "linear_dq8ca_q4gsw"])
def test_4bit_group_wise_linears_split_by_rows_with_their_scale_columns(rng, name):
    """At a 1 KiB binding W (2240 bytes) splits into 32 + 32 + 6 rows; the [G, N] scales
    (and weight sums) are cut by columns: G strided runs of the file each. The interpreter
    gives the unsplit graph's bits."""
    from webpte.kernels.reference import run_reference

    graph, blob = _q4_graphs(rng)[name]
    split = split_large_weights(graph, 1024)
    op = f"et_vk.{name}.default"
    blocks = [o for o in split.chain if o.name == op]
    assert [split.values[o.args[-1]].dims[-1] for o in blocks] == [32, 32, 6]
    cols = (2,) if name == "linear_q4gsw" else (4, 5)
    for o in blocks:
        for i in cols:
            ref = split.constants[split.tensor(o.args[i]).constant_id]
            assert ref.pieces == 2 and ref.nbytes == 2 * 4 * split.tensor(o.args[-1]).dims[-1]
    x = rng.standard_normal((5, 64)).astype(np.float32)
    whole = run_reference(graph, {graph.input_ids[0]: x}, blob).get(graph.output_ids[0])
    cut = run_reference(split, {split.input_ids[0]: x}, blob).get(split.output_ids[0])
    np.testing.assert_array_equal(whole, cut)


@pytest.mark.parametrize("name", ["linear_q4gsw", "linear_dq8ca_q4gsw"])
def test_a_split_4bit_plan_binds_within_the_limit_and_gives_the_same_bits(gpu, rng, name):
    from harness import assert_plans_bitwise
    from webpte.planner import lower

    graph, blob = _q4_graphs(rng)[name]
    limits = {"max_storage_buffer_binding_size": 1024}
    cut = lower(graph, limits=limits)
    files = [b for b in cut.buffers if b.init and b.init["kind"] in ("file", "file_parts")]
    assert max(b.size for b in files) <= 1024   # the weights (x and out are 1280, 1400 bytes)
    parts = [b.init for b in files if b.init["kind"] == "file_parts"]
    assert parts and all(len(p["parts"]) == 2 for p in parts)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    assert_plans_bitwise(graph, blob, [x], {"whole": lower(graph), "split": cut}, rel=1e-6)


def test_gemma3_1b_4bit_head_splits_in_two_at_webgpus_default_binding():
    """The 4-bit head of a Gemma-3-1B-shaped program (vocab 262,144 x 1152, groups of 32:
    W 151 MB, scales [36, 262144] 37.7 MB) at 128 MiB: 233,016 + 29,128 rows, each block's
    scales 36 runs of the file (the graph's dims and byte ranges only; no data)."""
    from webpte.pte.graph import ConstantRef, DType, Graph, OpCall, TensorValue

    v, k, g = 262144, 1152, 36
    values = [TensorValue(DType.FLOAT32, (1, k)), TensorValue(DType.UINT8, (v, k // 2), 0),
              TensorValue(DType.FLOAT32, (g, v), 1), 32, None,
              TensorValue(DType.FLOAT32, (1, v))]
    constants = [ConstantRef(4096, v * k // 2), ConstantRef(4096 + v * k // 2, 4 * g * v)]
    graph = Graph(values, [OpCall("et_vk.linear_q4gsw.default", (0, 1, 2, 3, 4, 5))], [0], [5],
                  constants)
    split = split_large_weights(graph)
    blocks = [op for op in split.chain if op.name == "et_vk.linear_q4gsw.default"]
    assert [split.tensor(op.args[1]).dims[0] for op in blocks] == [233016, 29128]
    second = split.constants[split.tensor(blocks[1].args[2]).constant_id]
    assert second.ranges()[:2] == [(4096 + v * k // 2 + 4 * 233016, 4 * 29128),
                                   (4096 + v * k // 2 + 4 * v + 4 * 233016, 4 * 29128)]
    assert len(second.ranges()) == g
    assert split.chain[-1].name == "aten.cat.default"
