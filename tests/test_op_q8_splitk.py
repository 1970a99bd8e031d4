"""The split-K decode kernel (linear_q8_splitk): exact i32 accumulators, bit-identical to the
one-column kernels, single and dual (fused two-pass) forms, the variant hint, counted cost."""

import numpy as np
import pytest

from harness import assert_close
from test_fusion_q8 import CASES, DUAL, EPILOGUES, _epilogue_graph, _pair_graph
from test_op_q8 import VARIANTS, int8, linear_graph, linear_operands, require_dot4
from webpte.errors import PlanError
from webpte.kernels.quantized.linear_q8 import (
    DECODE_HINT,
    DOT4_FEATURE,
    SUBGROUPS_FEATURE,
    SUBGROUPS_IMPLICIT,
    decode_hint,
    decode_variant,
)
from webpte.kernels.reference import run_reference
from webpte.native import Executor, wgsl_features
from webpte.plan.model import Plan
from webpte.planner import lower

SPLITK = DECODE_HINT + "splitk"
SKINNY = DECODE_HINT + "skinny"
# Partial sums added with subgroupAdd (the device's "subgroups"; lavapipe's subgroups are 8
# lanes, SwiftShader's 4), natively without WGSL's `enable subgroups;`.
SUBGROUPS = (SUBGROUPS_FEATURE, SUBGROUPS_IMPLICIT)
SPLIT_VARIANTS = VARIANTS + [pytest.param(SUBGROUPS, id="subgroups"),
                             pytest.param((DOT4_FEATURE, *SUBGROUPS), id="dot4-subgroups")]


def require(features) -> None:
    if DOT4_FEATURE in features:
        require_dot4()
    if SUBGROUPS_FEATURE in features and SUBGROUPS_FEATURE not in wgsl_features():
        pytest.skip("this device has no subgroups")


def run_plan(plan, blob, inputs):
    ex = Executor(plan, blob)
    ex.poison()
    return ex.run(inputs)[0]


def splitk_plan(g, features, **kw):
    plan = lower(g, features=(*features, SPLITK), **kw)
    assert any(k.name.startswith("linear_q8_splitk") for k in plan.kernels)
    return plan


@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("m,k,n", [
    (1, 4, 1),        # one word: most lanes have nothing to add
    (4, 64, 97),      # 97 columns: the last workgroup has 1 of 4
    (3, 1540, 5),     # K % 16 != 0: u32 words, 385 over 64 lanes
    (8, 1024, 7),     # K / 16 = 64: 16-byte words, 8 rows
    (5, 16, 13),      # 4 words, 20 lanes (m * cols) finish the outputs
    (2, 2052, 66),
])
def test_splitk_accumulators_exact(gpu, rng, features, m, k, n):
    # scale 1, zp 0, weight scales 1, no bias: y is the i32 accumulator, exact in f32.
    require(features)
    ops = linear_operands(rng, n, k, unit_scales=True)
    g, blob = linear_graph(m, k, ops, 1.0, 0, bias=False)
    x = int8(rng, (m, k))
    out = run_plan(splitk_plan(g, features), blob, [x])
    acc = (x.astype(np.int64) @ ops[0].astype(np.int64).T).astype(np.float32)
    ref = run_reference(g, {g.input_ids[0]: x}, blob).get(g.output_ids[0])
    assert_close(ref, acc, exact=True, what="reference vs int64 matmul")
    assert_close(out, acc, exact=True, what="split-K accumulators")


@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("m,k,n,x_dtype,zp", [
    (4, 576, 37, np.int8, 3),
    (1, 36, 9, np.int8, -128),
    (3, 64, 11, np.float32, -7),     # quantized in the kernel
    (2, 44, 6, np.float32, 5),
])
def test_splitk_matches_skinny_bitwise(gpu, rng, features, m, k, n, x_dtype, zp):
    require(features)
    ops = linear_operands(rng, n, k)
    g, blob = linear_graph(m, k, ops, 0.0213, zp, x_dtype=x_dtype)
    x = (int8(rng, (m, k)) if x_dtype == np.int8
         else (rng.standard_normal((m, k)) * 2).astype(np.float32))
    split = run_plan(splitk_plan(g, features), blob, [x])
    skinny = run_plan(lower(g, features=(*features, SKINNY)), blob, [x])
    assert split.tobytes() == skinny.tobytes(), "split-K differs from the skinny kernel"
    ref = run_reference(g, {g.input_ids[0]: x}, blob).get(g.output_ids[0])
    assert_close(split, ref, rel=1e-6, what="split-K vs numpy")


@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("case", CASES)
def test_splitk_dual_pair_is_bitwise_unfused(gpu, features, case):
    require(features)
    g, blob = _pair_graph(**case)
    fused = splitk_plan(g, features)
    assert [d.op for d in fused.dispatches] == [DUAL]
    rng = np.random.default_rng(5)
    xs = [int8(rng, (1, case["m"], case["k"])) for _ in range(2)]
    outs = [run_plan(p, blob, xs) for p in (fused, lower(g, features=features, fuse=False))]
    assert outs[0].tobytes() == outs[1].tobytes(), "split-K dual differs from unfused"


@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("case,ops,n_fused,n_unfused", EPILOGUES)
def test_splitk_dual_epilogue_is_bitwise_unfused(gpu, features, case, ops, n_fused, n_unfused):
    require(features)
    g, blob = _epilogue_graph(**case)
    fused = splitk_plan(g, features)
    labels = [d.op for d in fused.dispatches]
    assert len(labels) == n_fused and labels[0] == DUAL + ("+" + ops if ops else "")
    rng = np.random.default_rng(7)
    m, k, n = case["m"], case["k"], case["n"]
    inputs = [int8(rng, (1, m, k)) for _ in range(2)]
    if not case["chain"].startswith("silu"):
        inputs.append(rng.standard_normal((1, m, n)).astype(np.float32))
    if case["chain"] == "add_mul":
        inputs.append(np.array([-1.37], np.float32))
    outs = [run_plan(p, blob, inputs) for p in (fused, lower(g, features=features, fuse=False))]
    assert outs[0].dtype == outs[1].dtype and outs[0].tobytes() == outs[1].tobytes(), \
        "split-K dual epilogue differs from unfused"


def test_variant_hint_and_shape():
    assert decode_variant(()) == "skinny"
    assert decode_hint("CPU") == SKINNY and decode_hint("DiscreteGPU") == SPLITK
    assert decode_variant({SPLITK, "packed_4x8_integer_dot_product"}) == "splitk"
    with pytest.raises(PlanError, match="not one of"):
        decode_variant({DECODE_HINT + "nope"})
    rng = np.random.default_rng(3)
    g, _ = linear_graph(4, 576, linear_operands(rng, 1538, 576), 0.02, 0)
    plan = lower(g, features=[SPLITK])
    (d,) = plan.dispatches
    assert d.workgroups == (385, 1, 1)     # 4 columns per workgroup
    wgsl = plan.kernels[0].wgsl
    assert "@workgroup_size(64)" in wgsl and "workgroupBarrier()" in wgsl
    assert "vec4<u32>" not in wgsl         # 36 vec4 words would idle 28 of 64 lanes
    assert plan.features == []             # the hint is no WGSL feature
    # Workgroup memory stays within WebGPU's 16 KiB default for 8 rows and two passes.
    g, _ = _pair_graph(m=8, k=4096, n=9, bias=True)
    wgsl = lower(g, features=[SPLITK]).kernels[0].wgsl
    size = int(wgsl.split("var<workgroup> part: array<i32, ")[1].split(">")[0])
    assert 4 * size <= 16384


def test_linear_cost_is_counted_and_serialised():
    rng = np.random.default_rng(4)
    g, _ = linear_graph(3, 64, linear_operands(rng, 10, 64), 0.02, 0)
    read = 10 * 64 + 3 * 64 + 4 * 10 * 3
    for hint in (SKINNY, SPLITK):
        (d,) = lower(g, features=[hint]).dispatches
        # x loaded again by each of the 10 one-column invocations, or each split-K workgroup
        x_loads = 10 if hint == SKINNY else d.workgroups[0] * d.workgroups[1]
        assert d.cost == {"bytes_read": read, "macs": 3 * 10 * 64,
                          "bytes_loaded": read + (x_loads - 1) * 3 * 64}, hint
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    plan = lower(g)
    assert plan.dispatches[0].cost["macs"] == 2 * 4 * 5 * 36
    back = Plan.from_json(plan.to_json())
    assert back.dispatches[0].cost == plan.dispatches[0].cost


def test_subgroup_kernels_say_what_they_need():
    """The subgroup form is planned only with the feature, lists it in plan.features (the
    executors refuse it on a device without subgroups), and asks for WGSL's
    `enable subgroups;` unless the compiler takes the builtins without it (naga)."""
    rng = np.random.default_rng(5)
    g, _ = linear_graph(4, 576, linear_operands(rng, 40, 576), 0.02, 0)
    plain = lower(g, features=[SPLITK]).kernels[0].wgsl
    assert "subgroupAdd" not in plain and "atomic" not in plain
    page = lower(g, features=[SPLITK, SUBGROUPS_FEATURE])
    assert page.features == [SUBGROUPS_FEATURE]
    assert "enable subgroups;" in page.kernels[0].wgsl
    assert "subgroupAdd(" in page.kernels[0].wgsl
    native = lower(g, features=[SPLITK, *SUBGROUPS])
    assert native.features == [SUBGROUPS_FEATURE]
    assert "enable subgroups;" not in native.kernels[0].wgsl
    # The skinny kernel uses none: the feature is not listed.
    assert lower(g, features=[SKINNY, *SUBGROUPS]).features == []
