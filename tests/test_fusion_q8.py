"""Dual int8 linear fusion: two passes on one W and their add as one bit-identical dispatch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness import assert_close
from test_fusion import _calls, _quantize
from test_op_q8 import LINEAR, VARIANTS, int8, linear_operands, require_dot4
from webpte.errors import PlanError
from webpte.kernels.quantized.linear_q8 import GEMM_HINT, GEMM_VARIANTS
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.program import load, plan_method
from webpte.pte import read_program
from webpte.pte.builder import GraphBuilder

FIXTURES = Path(__file__).parent / "fixtures"
DUAL = "fused:linear_q8+linear_q8+add"
# Dispatches per call: no fusion, elementwise only, all; and the dual dispatches.
PROGRAMS = {
    # 8 duals take their consumers' chains: residual adds, the MLP's gate * up, its silu;
    # each layer's q, k and v pairs run as one joined dispatch, its gate and up pairs as one
    # paired dispatch (15 pairs, 9 dispatches) that also quantizes the product for the down
    # projection (both passes); a layer's two sink blends are one dispatch
    "decoder_q8_tiny.pte": (254, 69, 29, 9),
    "tiny_vlm/decoder_q8.pte": (254, 69, 29, 9),
    "vision_q8_tiny.pte": (216, 121, 95, 13),   # one 4-row pair, 12 tiled (64 rows)
    "tiny_vlm/vision_q8.pte": (118, 68, 54, 7),  # every pair has > 8 rows: tiled
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_dual_fusion_cuts_dispatches(name, monkeypatch):
    counts = []
    for mode in ("0", "elementwise", "1"):
        monkeypatch.setenv("WEBPTE_FUSE", mode)
        plan = plan_method(read_program((FIXTURES / name).read_bytes()))
        counts.append(len(plan.dispatches))
    duals = sum(d.op.startswith(DUAL) for d in plan.dispatches)
    print(f"{name}: dispatches {counts}, dual {duals}")
    assert (*counts, duals) == PROGRAMS[name]


@pytest.mark.parametrize("name", [n for n, c in PROGRAMS.items() if c[3]])
def test_dual_outputs_are_bitwise_unfused(gpu, name, monkeypatch):
    path = FIXTURES / name
    plans = {}
    for mode in ("0", "elementwise", "1"):
        monkeypatch.setenv("WEBPTE_FUSE", mode)
        plans[mode] = load(path)
    fused = plans["1"]
    fused.executor.poison()
    fwd = fused.program.method("forward")
    in_ids, out_ids = fwd.input_value_ids(), fwd.output_value_ids()
    state: dict = {}
    for i, inputs in enumerate(_calls(path, fused.plan)):
        outs = {mode: p.run(*inputs) for mode, p in plans.items()}
        env = run_reference(fwd.graph, dict(zip(in_ids, inputs, strict=True)), fused.data, state)
        for j, y in enumerate(outs["1"]):
            for mode in ("0", "elementwise"):
                x = outs[mode][j]
                assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), \
                    f"{name} call {i} output {j}: fused differs from WEBPTE_FUSE={mode}"
            assert_close(y, env.get(out_ids[j]), rel=1e-4,
                         what=f"{name} call {i} output {j} vs numpy")


def _pair_graph(m, k, n, *, bias, swap=False, shared_output=False, alpha=1, w_fill=None):
    """y = linear(xa) + alpha * linear(xb) on one W (every weight `w_fill` if given); bias on
    the first pass only."""
    rng = np.random.default_rng(11)
    w, sums, scales, b_vals = linear_operands(rng, n, k)
    if w_fill is not None:
        w[:] = w_fill
        sums[:n] = w_fill * k
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (1, m, k)), b.tensor(np.int8, (1, m, k))
    ya, yb, y = (b.tensor(np.float32, (1, m, n)) for _ in range(3))
    wc, sc, scc = b.constant(w), b.constant(sums), b.constant(scales)
    b.op(LINEAR, xa, b.scalar(0.0213), b.scalar(3), wc, sc, scc,
         b.constant(b_vals) if bias else b.scalar(None), ya)
    b.op(LINEAR, xb, b.scalar(0.00071), b.scalar(-5), wc, sc, scc, b.scalar(None), yb)
    b.op("aten.add.Tensor", *((yb, ya) if swap else (ya, yb)), b.scalar(alpha), y)
    return b.build([xa, xb], [y, ya] if shared_output else [y])


CASES = [
    pytest.param(dict(m=4, k=36, n=5, bias=False), id="4x36x5"),
    pytest.param(dict(m=3, k=772, n=67, bias=True), id="3x772x67-bias"),
    pytest.param(dict(m=1, k=960, n=131, bias=True, swap=True), id="1x960x131-bias-swap"),
    pytest.param(dict(m=7, k=12, n=1, bias=False, alpha=0.5), id="7x12x1-alpha"),
    pytest.param(dict(m=8, k=16, n=9, bias=True), id="8x16x9-bias"),
]
# > 8 rows: workgroup tiles (linear_q8_dual_tiled), partial tiles in both directions.
TILED_CASES = [
    pytest.param(dict(m=9, k=36, n=5, bias=False), id="9x36x5-tiled"),
    pytest.param(dict(m=33, k=100, n=131, bias=True, swap=True), id="33x100x131-bias-swap"),
    pytest.param(dict(m=70, k=52, n=67, bias=True, alpha=0.5), id="70x52x67-alpha"),
]


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("case", CASES + TILED_CASES)
def test_dual_pair_exact(gpu, features, case):
    if features:
        require_dot4()
    g, blob = _pair_graph(**case)
    fused, unfused = lower(g, features=features), lower(g, features=features, fuse=False)
    assert [d.op for d in fused.dispatches] == [DUAL]
    assert len(unfused.dispatches) == 3
    dot4 = [("dot4I8Packed" in k.wgsl) for k in fused.kernels]
    assert dot4 == [bool(features)]
    rng = np.random.default_rng(5)
    xs = [int8(rng, (1, case["m"], case["k"])) for _ in range(2)]
    outs = []
    for plan in (fused, unfused):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run(xs)[0])
    assert outs[0].tobytes() == outs[1].tobytes(), "dual kernel differs from unfused"
    ref = run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob).get(g.output_ids[0])
    assert_close(outs[0], ref, rel=1e-6, what="dual linear vs numpy")


def test_dual_pair_variants_render():
    g, _ = _pair_graph(m=4, k=64, n=8, bias=True)
    dot4_feature = VARIANTS[1].values[0][0]
    portable = lower(g).kernels[0].wgsl
    dot4 = lower(g, features=[dot4_feature]).kernels[0].wgsl
    # The q8_dot:unpacked hint (SwiftShader's) takes the portable path where dot4 exists.
    hinted = lower(g, features=[dot4_feature, "q8_dot:unpacked"]).kernels[0].wgsl
    assert hinted == portable
    assert "dot4I8Packed" not in portable and "fn unpack" in portable
    assert "dot4I8Packed" in dot4 and "fn unpack" not in dot4
    assert "vec4<u32>" in portable   # K % 16 == 0: 16 bytes per load
    # Each vec4 word unpacked once per component, not once per product.
    assert portable.count("unpack(wv") == 4 * 8 and "dot(unpack" not in portable
    with pytest.raises(PlanError, match="int8 dot variant 'fast'"):
        lower(g, features=[dot4_feature, "q8_dot:fast"])


def test_the_unpacked_hint_reaches_the_kernels_that_unpack_a_word_once():
    """q8_dot:unpacked: the dual kernels (few rows and tiles) and the single tile take the
    portable dot; the one-column skinny linear, which would unpack a word for each product,
    keeps dot4 (SwiftShader measured it 1.67x slower portable)."""
    dot4 = VARIANTS[1].values[0][0]
    hinted = [dot4, "q8_dot:unpacked"]

    def uses_dot4(m: int, fuse: bool) -> set[bool]:
        g, _ = _pair_graph(m=m, k=64, n=8, bias=True)
        return {"dot4I8Packed" in k.wgsl for k in lower(g, features=hinted, fuse=fuse).kernels
                if k.name.startswith("linear_q8")}

    assert uses_dot4(4, True) == {False} and uses_dot4(70, True) == {False}   # dual
    assert uses_dot4(70, False) == {False}    # the single tile
    assert uses_dot4(4, False) == {True}      # the one-column skinny linear


def test_pairs_used_elsewhere_are_not_fused():
    for m in (4, 70):   # the column kernel and the tiled one
        g, _ = _pair_graph(m=m, k=36, n=5, bias=False, shared_output=True)
        assert DUAL not in [d.op for d in lower(g).dispatches]
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    assert len(lower(g, fuse="elementwise").dispatches) == 3
    assert len(lower(g, fuse=False).dispatches) == 3


def test_different_weights_are_not_fused():
    rng = np.random.default_rng(2)
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (4, 8)), b.tensor(np.int8, (4, 8))
    ya, yb, y = (b.tensor(np.float32, (4, 4)) for _ in range(3))
    for x, o in ((xa, ya), (xb, yb)):
        w, sums, scales, _ = linear_operands(rng, 4, 8)
        b.op(LINEAR, x, b.scalar(0.02), b.scalar(0), b.constant(w), b.constant(sums),
             b.constant(scales), b.scalar(None), o)
    b.op("aten.add.Tensor", ya, yb, b.scalar(1), y)
    g, _ = b.build([xa, xb], [y])
    assert len(lower(g).dispatches) == 3


# -- epilogue: the chain that consumes the sum, in the dual kernel --------------------------

def _epilogue_graph(m, k, n, chain, *, bias=False):
    """y = linear(xa) + linear(xb) on one W, then `chain`: "silu" (y * sigmoid(y)),
    "silu_and_sum" (the same, y an output too: the chain cannot hold it), "add" (h = y + r),
    "add_mul" (h * s, s one element: no binding left for s, so the mul stays its own dispatch),
    "add_mul_r" (h * r), "add_quantize" (quantize(h) to int8: stays its own dispatch)."""
    rng = np.random.default_rng(13)
    w, sums, scales, b_vals = linear_operands(rng, n, k)
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (1, m, k)), b.tensor(np.int8, (1, m, k))
    r, s = b.tensor(np.float32, (1, m, n)), b.tensor(np.float32, (1,))
    ya, yb, y, h = (b.tensor(np.float32, (1, m, n)) for _ in range(4))
    wc, sc, scc = b.constant(w), b.constant(sums), b.constant(scales)
    b.op(LINEAR, xa, b.scalar(0.0213), b.scalar(3), wc, sc, scc,
         b.constant(b_vals) if bias else b.scalar(None), ya)
    b.op(LINEAR, xb, b.scalar(0.00071), b.scalar(-5), wc, sc, scc, b.scalar(None), yb)
    b.op("aten.add.Tensor", ya, yb, b.scalar(1), y)
    if chain.startswith("silu"):   # y * sigmoid(y): the sum read twice, within the chain
        sig, out = b.tensor(np.float32, (1, m, n)), b.tensor(np.float32, (1, m, n))
        b.op("aten.sigmoid.default", y, sig)
        b.op("aten.mul.Tensor", y, sig, out)
        if chain == "silu":
            return b.build([xa, xb], [out])
        return b.build([xa, xb], [out, y])    # "silu_and_sum": the sum is an output too
    b.op("aten.add.Tensor", r, y, b.scalar(1), h)
    inputs, out = [xa, xb, r], h
    if chain == "add_mul":
        out = b.tensor(np.float32, (1, m, n))
        b.op("aten.mul.Tensor", h, s, out)
        inputs.append(s)
    elif chain == "add_mul_r":
        out = b.tensor(np.float32, (1, m, n))
        b.op("aten.mul.Tensor", h, r, out)
    elif chain == "add_quantize":
        out = b.tensor(np.int8, (1, m, n))
        _quantize(b, h, 0.0371, -3, -128, 127, out)
    return b.build(inputs, [out])


EPILOGUES = [   # case, dispatches fused (the dual's label), fused dispatches, unfused
    pytest.param(dict(m=3, k=36, n=67, chain="add"), "add", 1, 4, id="3x36x67-add"),
    pytest.param(dict(m=1, k=772, n=131, chain="add"), "add", 1, 4, id="1x772x131-add"),
    pytest.param(dict(m=5, k=12, n=9, chain="add_mul"), "add", 2, 5, id="5x12x9-add-mul"),
    pytest.param(dict(m=4, k=28, n=11, chain="add_mul_r"), "add+mul", 1, 5,
                 id="4x28x11-add-mul-r"),
    pytest.param(dict(m=7, k=20, n=13, chain="add_quantize"), "add", 2, 5,
                 id="7x20x13-add-quantize"),
    pytest.param(dict(m=2, k=16, n=5, chain="add", bias=True), "", 2, 4,
                 id="2x16x5-bias-no-room"),
    pytest.param(dict(m=4, k=32, n=45, chain="silu"), "sigmoid+mul", 1, 5, id="4x32x45-silu"),
    pytest.param(dict(m=4, k=32, n=45, chain="silu_and_sum"), "", 2, 5,
                 id="4x32x45-silu-sum-out"),
]
TILED_EPILOGUES = [
    pytest.param(dict(m=70, k=36, n=67, chain="add"), "add", 1, 4, id="70x36x67-add"),
    pytest.param(dict(m=17, k=28, n=11, chain="add_mul_r"), "add+mul", 1, 5,
                 id="17x28x11-add-mul-r"),
]


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("case,ops,n_fused,n_unfused", EPILOGUES + TILED_EPILOGUES)
def test_dual_epilogue_exact(gpu, features, case, ops, n_fused, n_unfused):
    if features:
        require_dot4()
    g, blob = _epilogue_graph(**case)
    fused, unfused = lower(g, features=features), lower(g, features=features, fuse=False)
    labels = [d.op for d in fused.dispatches]
    assert len(labels) == n_fused and len(unfused.dispatches) == n_unfused, labels
    assert labels[0] == DUAL + ("+" + ops if ops else "")
    assert max(len(d.bindings) for d in fused.dispatches) <= 8
    rng = np.random.default_rng(7)
    m, k, n = case["m"], case["k"], case["n"]
    inputs = [int8(rng, (1, m, k)) for _ in range(2)]
    if not case["chain"].startswith("silu"):
        inputs.append(rng.standard_normal((1, m, n)).astype(np.float32))
    if case["chain"] == "add_mul":
        inputs.append(np.array([-1.37], np.float32))
    outs = []
    for plan in (fused, unfused, lower(g, features=features, fuse="elementwise")):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run(inputs)[0])   # (y * sigmoid(y), y): the first is checked
    for other in outs[1:]:
        assert outs[0].dtype == other.dtype and outs[0].tobytes() == other.tobytes(), \
            "dual epilogue differs from unfused"
    ref = run_reference(g, dict(zip(g.input_ids, inputs, strict=True)), blob).get(g.output_ids[0])
    if outs[0].dtype == np.int8:
        assert outs[0].tobytes() == ref.tobytes(), "quantized epilogue differs from numpy"
    else:
        assert_close(outs[0], ref, rel=1e-5, what="dual epilogue vs numpy")


def test_dual_epilogue_renders_the_shared_chain():
    g, _ = _epilogue_graph(m=3, k=36, n=67, chain="add_mul_r")
    wgsl = lower(g).kernels[0].wgsl
    assert "fn epilogue(i: u32, y: f32) -> f32" in wgsl
    assert "let v1: f32 = x1_0 * x1_1;" in wgsl


@pytest.mark.parametrize("dot", VARIANTS)
@pytest.mark.parametrize("k", [68, 80], ids=["words", "vec4_words"])
@pytest.mark.parametrize("variant", GEMM_VARIANTS)
def test_tiled_dual_variants_are_bitwise_unfused(gpu, variant, k, dot):
    """Each many-row tile (the planner picks per adapter: d16x16 on CPU adapters) gives the
    unfused outputs; 150 rows and 300 columns leave partial tiles either way; K = 80 lets
    the direct tile read vec4 words."""
    g, blob = _pair_graph(m=150, k=k, n=300, bias=True)
    if dot:
        require_dot4()
    hint = {GEMM_HINT + variant, *dot}
    fused = lower(g, features=hint)
    assert [d.op for d in fused.dispatches] == [DUAL]
    assert ("dot4I8Packed" in fused.kernels[0].wgsl) == bool(dot)
    t = GEMM_VARIANTS[variant]
    assert fused.dispatches[0].workgroups == (-(-300 // (8 * t["rn"])), -(-150 // (8 * t["rm"])), 1)
    rng = np.random.default_rng(9)
    xs = [int8(rng, (1, 150, k)) for _ in range(2)]
    outs = []
    for plan in (fused, lower(g, fuse=False, features=set(dot))):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run(xs)[0])
    assert outs[0].tobytes() == outs[1].tobytes(), f"{variant} differs from unfused"


def test_direct_tiles_hold_no_more_rows_than_the_matrix():
    """A 40-row linear in d16x16 runs 5 rows an invocation (one tile of 40), not 16."""
    g, _ = _pair_graph(m=40, k=16, n=300, bias=False)
    plan = lower(g, features={GEMM_HINT + "d16x16"})
    assert plan.dispatches[0].workgroups == (-(-300 // 128), 1, 1)
    wgsl = plan.kernels[0].wgsl
    assert "workgroup tile 40 rows x 128 cols" in wgsl and "each invocation 5x16 outputs" in wgsl


def test_unknown_gemm_variant_is_a_plan_error():
    g, _ = _pair_graph(m=40, k=16, n=8, bias=False)
    with pytest.raises(PlanError, match="gemm variant 't4x4'"):
        lower(g, features={GEMM_HINT + "t4x4"})



@pytest.mark.parametrize("m,k,n,fill", [
    (4, 64, 9, None),
    (3, 2064, 13, None),     # three f32 chunks, the last one partial
    # W all -127, x -127 but every fourth -128: each 4-byte dot adds 64643 (odd), so a full
    # chunk sums to 16.5M, just under 2^24, where twice the chunk would round.
    (4, 4608, 8, -127),
])
def test_f32_products_are_the_integer_dot(gpu, m, k, n, fill):
    """q8_f32:on takes the dual kernel's int8 products in f32, in chunks whose partial sums
    stay integers below 2^24: its outputs are bitwise the i32 portable dot's."""
    g, blob = _pair_graph(m=m, k=k, n=n, bias=True, w_fill=fill)
    rng = np.random.default_rng(9)
    odd = np.where(np.arange(k) % 4 == 3, -128, fill or 0).astype(np.int8)
    xs = [np.broadcast_to(odd, (1, m, k)).copy() if fill is not None else int8(rng, (1, m, k))
          for _ in range(2)]
    outs = {}
    for hint in ("q8_f32:off", "q8_f32:on"):
        plan = lower(g, features=[hint])
        wgsl = plan.kernels[0].wgsl
        assert ("FCHUNK" in wgsl) == (hint == "q8_f32:on")
        ex = Executor(plan, blob)
        ex.poison()
        outs[hint] = ex.run(xs)[0]
    assert outs["q8_f32:on"].tobytes() == outs["q8_f32:off"].tobytes()
    dot4 = VARIANTS[1].values[0][0]   # the f32 products win over dot4 in this kernel alone
    assert "dot4I8Packed" not in lower(g, features=[dot4, "q8_f32:on"]).kernels[0].wgsl
    assert "dot4I8Packed" in lower(g, features=[dot4]).kernels[0].wgsl
    ref = run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob).get(g.output_ids[0])
    assert_close(outs["q8_f32:on"], ref, rel=1e-6, what="f32-product dual linear vs numpy")
