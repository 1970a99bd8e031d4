"""Joined decode linears: dual linears on the same int8 inputs (q, k and v) as one dispatch
over their W rows back to back, bit-identical to each pair's own dispatch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness import assert_plans_bitwise
from test_fusion_q8 import DUAL
from test_op_q8 import LINEAR, int8, linear_operands
from test_op_q8_splitk import SPLIT_VARIANTS, require
from webpte.errors import PlanError
from webpte.kernels.quantized.linear_q8 import DECODE_HINT
from webpte.plan import Plan
from webpte.planner import lower
from webpte.planner.fusion_q8 import JOIN_HINT, JOIN_MAX
from webpte.pte.builder import GraphBuilder

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"


def _sibling_graph(m, k, ns, *, clone=True, bias_on=None):
    """Pairs y_i = linear(xa) + linear(xb) on their own W_i, all reading one xa and one xb
    (through a clone each when `clone`, as the decoder recipe has them); `bias_on`: the
    index of a pair whose first pass adds a bias."""
    rng = np.random.default_rng(23)
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (1, m, k)), b.tensor(np.int8, (1, m, k))
    outs = []
    for i, n in enumerate(ns):
        w, sums, scales, b_vals = linear_operands(rng, n, k)
        wc, sc, scc = b.constant(w), b.constant(sums), b.constant(scales)
        ya, yb, y = (b.tensor(np.float32, (1, m, n)) for _ in range(3))
        ins = []
        for x in (xa, xb):
            if clone:
                c = b.tensor(np.int8, (1, m, k))
                b.op("aten.clone.default", x, b.scalar(None), c)
                x = c
            ins.append(x)
        b.op(LINEAR, ins[0], b.scalar(0.0213 + i * 1e-3), b.scalar(3 - i), wc, sc, scc,
             b.constant(b_vals) if bias_on == i else b.scalar(None), ya)
        b.op(LINEAR, ins[1], b.scalar(0.00071), b.scalar(-5 + i), wc, sc, scc, b.scalar(None),
             yb)
        b.op("aten.add.Tensor", ya, yb, b.scalar(1), y)
        outs.append(y)
    return b.build([xa, xb], outs)


JOINED = DUAL + ":joined"


DECODES = ["skinny", "splitk", "splitk16"]


def _shared_and_apart(g, features, decode):
    """`g` planned with the decode kernel `decode` and the WGSL `features`, and so with
    every pair apart (`q8_join:off`)."""
    require(features)
    features = [*features, DECODE_HINT + decode]
    return lower(g, features=features), lower(g, features=[*features, JOIN_HINT + "off"])


@pytest.mark.parametrize("decode", DECODES)
@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("case", [
    # columns that straddle the pairs inside one invocation; sums and scales padded to N4
    pytest.param(dict(m=4, k=36, ns=(5, 12, 67)), id="4x36-5,12,67"),
    pytest.param(dict(m=1, k=64, ns=(24, 8)), id="1x64-24,8-vec4"),
    # four pairs: three join, the fourth runs alone
    pytest.param(dict(m=3, k=16, ns=(9, 3, 17, 6), clone=False), id="3x16-four"),
])
def test_joined_linears_are_bitwise_apart(gpu, decode, features, case):
    g, blob = _sibling_graph(**case)
    joined, apart = _shared_and_apart(g, features, decode)
    n_pairs = len(case["ns"])
    ops = [d.op for d in joined.dispatches]
    joins = min(n_pairs, JOIN_MAX)
    assert ops.count(JOINED + str(joins)) == 1 and ops.count(DUAL) == n_pairs - joins
    assert [d.op for d in apart.dispatches] == [DUAL] * n_pairs
    parts = [b.init for b in joined.buffers if b.init and b.init["kind"] == "file_parts"]
    assert len(parts) == 2   # the W rows, the per-column words
    assert Plan.from_json(joined.to_json()) == joined
    rng = np.random.default_rng(9)
    xs = [int8(rng, (1, case["m"], case["k"])) for _ in range(2)]
    assert_plans_bitwise(g, blob, xs, {"joined": joined, "apart": apart})


def test_pairs_on_other_inputs_or_with_bias_stay_apart():
    g, _ = _sibling_graph(m=4, k=16, ns=(8, 8, 8), bias_on=1)
    ops = [d.op for d in lower(g).dispatches]
    assert ops == [JOINED + "2", DUAL]   # the pair with a bias runs alone
    tiled, _ = _sibling_graph(m=9, k=16, ns=(8, 8))   # > 8 rows: the tiled kernel, apart
    assert [d.op for d in lower(tiled).dispatches] == [DUAL, DUAL]


@pytest.mark.parametrize("breaks,match", [
    (lambda init: init.update(parts=[]), "file parts"),
    (lambda init: init["parts"][0].update(offset=-1), "file parts"),
    (lambda init: init["parts"].append({"offset": 0, "nbytes": 1 << 30}), "its file parts are"),
])
def test_malformed_file_parts_are_refused(breaks, match):
    g, _ = _sibling_graph(m=4, k=16, ns=(8, 8))
    plan = json.loads(lower(g).to_json())
    init = next(b["init"] for b in plan["buffers"]
                if b["init"] and b["init"]["kind"] == "file_parts")
    breaks(init)
    with pytest.raises(PlanError, match=match):
        Plan.from_json(json.dumps(plan))


def _mlp_graph(m, k, n, *, gate_read_twice=False, tail=None):
    """silu(linear(xa) + linear(xb) on W_g) * (the same on W_u), as the decoder's MLP has
    it: the gate pair's epilogue is the silu, the up pair's the product. With
    `gate_read_twice` the silu's result is a method output too (the pair must stay apart).
    `tail` ("quantize", "two_pass" or "two_pass+h"): the product quantized for the next
    linear, one pass or both as the decoder's recipe has them ("+h": the product is a method
    output too)."""
    rng = np.random.default_rng(31)
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (1, m, k)), b.tensor(np.int8, (1, m, k))
    sig, silu, h = (b.tensor(np.float32, (1, m, n)) for _ in range(3))
    for i in range(2):
        w, sums, scales, _ = linear_operands(rng, n, k)
        wc, sc, scc = b.constant(w), b.constant(sums), b.constant(scales)
        ya, yb, y = (b.tensor(np.float32, (1, m, n)) for _ in range(3))
        b.op(LINEAR, xa, b.scalar(0.0213), b.scalar(3), wc, sc, scc, b.scalar(None), ya)
        b.op(LINEAR, xb, b.scalar(0.00071 * (i + 1)), b.scalar(-5), wc, sc, scc,
             b.scalar(None), yb)
        b.op("aten.add.Tensor", ya, yb, b.scalar(1), y)
        if i == 0:   # the gate: silu
            b.op("aten.sigmoid.default", y, sig)
            b.op("aten.mul.Tensor", y, sig, silu)
        else:        # the up: times the gate's silu
            b.op("aten.mul.Tensor", silu, y, h)
    if tail:
        return b.build([xa, xb], _two_pass_quantize(b, h, (1, m, n), tail != "quantize")
                       + ([h] if tail.endswith("+h") else []))
    return b.build([xa, xb], [h, silu] if gate_read_twice else [h])


def _two_pass_quantize(b, x, shape, two_pass: bool) -> list[int]:
    """q1 = q8(x; s1, z1) and, with `two_pass`, q2 = q8(x - (clamp(round(x * (1/s1)) + z1)
    - z1) * s1; s2, z2), the scales and zero points as 0-d constants where the recipe has them."""
    s1, z1, s2, z2 = 0.0213, 7, 0.00029, -3
    q1 = b.tensor(np.int8, shape)
    b.op(QUANTIZE, x, b.scalar(s1), b.scalar(z1), b.scalar(-128), b.scalar(127),
         b.scalar(None), q1)
    if not two_pass:
        return [q1]
    t, r, a, c, d, e, f = (b.tensor(np.float32, shape) for _ in range(7))
    zf, zf2 = b.tensor(np.float32, ()), b.tensor(np.float32, ())
    zc = b.constant(np.array(z1, np.int32))
    b.op("aten.mul.Tensor", x, b.constant(np.array(1 / s1, np.float32)), t)
    b.op("aten.round.default", t, r)
    b.op("aten._to_copy.default", zc, *[b.scalar(None)] * 4, b.scalar(False), b.scalar(None), zf)
    b.op("aten.add.Tensor", r, zf, b.scalar(1), a)
    b.op("aten.clamp.default", a, b.scalar(-128), b.scalar(127), c)
    b.op("aten._to_copy.default", b.constant(np.array(z1, np.int32)), *[b.scalar(None)] * 4,
         b.scalar(False), b.scalar(None), zf2)
    b.op("aten.sub.Tensor", c, zf2, b.scalar(1), d)
    b.op("aten.mul.Tensor", d, b.constant(np.array(s1, np.float32)), e)
    b.op("aten.sub.Tensor", x, e, b.scalar(1), f)
    q2 = b.tensor(np.int8, shape)
    b.op(QUANTIZE, f, b.scalar(s2), b.scalar(z2), b.scalar(-128), b.scalar(127),
         b.scalar(None), q2)
    return [q1, q2]


PAIRED = DUAL + ":paired+sigmoid+mul+mul"


@pytest.mark.parametrize("decode", DECODES)
@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("case", [
    pytest.param(dict(m=4, k=36, n=5), id="4x36x5"),
    pytest.param(dict(m=4, k=64, n=67), id="4x64x67-vec4"),
    pytest.param(dict(m=1, k=772, n=12), id="1x772x12"),
])
def test_paired_linears_are_bitwise_apart(gpu, decode, features, case):
    g, blob = _mlp_graph(**case)
    paired, apart = _shared_and_apart(g, features, decode)
    assert [d.op for d in paired.dispatches] == [PAIRED]
    assert [d.op for d in apart.dispatches] == [DUAL + "+sigmoid+mul", DUAL + "+mul"]
    assert paired.dispatches[0].cost["macs"] == sum(d.cost["macs"] for d in apart.dispatches)
    rng = np.random.default_rng(4)
    xs = [int8(rng, (1, case["m"], case["k"])) for _ in range(2)]
    assert_plans_bitwise(g, blob, xs, {"paired": paired, "apart": apart}, rel=1e-5)


TAIL = PAIRED + "+quantize"
TWO_PASS = TAIL + "+mul+round+cast+add+clamp+cast+sub+mul+sub+quantize"


@pytest.mark.parametrize("features", SPLIT_VARIANTS)
@pytest.mark.parametrize("case,tail,ops", [
    (dict(m=4, k=64, n=68), "two_pass", TWO_PASS),
    (dict(m=3, k=36, n=8), "quantize", TAIL),
    (dict(m=1, k=772, n=12), "two_pass", TWO_PASS),
], ids=["4x64x68-two-pass", "3x36x8-one-pass", "1x772x12-two-pass"])
def test_the_quantize_of_the_product_runs_in_the_paired_dispatch(gpu, features, case, tail,
                                                                  ops):
    """The down projection's input quantize (one pass or both) is the paired dispatch's
    tail: int8 words written where the product was stored, bitwise the plan apart and the
    unfused one."""
    g, blob = _mlp_graph(**case, tail=tail)
    fused, apart = _shared_and_apart(g, features, "skinny")
    assert [d.op for d in fused.dispatches] == [ops]
    assert len(fused.dispatches[0].bindings) <= 8
    assert [d.op for d in apart.dispatches][:2] == [DUAL + "+sigmoid+mul", DUAL + "+mul"]
    rng = np.random.default_rng(8)
    xs = [int8(rng, (1, case["m"], case["k"])) for _ in range(2)]
    assert_plans_bitwise(g, blob, xs, {"fused": fused, "apart": apart,
                                       "unfused": lower(g, features=features, fuse=False)})


@pytest.mark.parametrize("decode,shape,tail", [
    ("splitk", (4, 64, 68), "two_pass"),     # the split-K kernel keeps it apart
    ("skinny", (4, 64, 66), "two_pass"),     # N not a multiple of 4: a word spans rows
    ("skinny", (4, 64, 68), "two_pass+h"),   # the product is read elsewhere too
])
def test_a_tail_that_cannot_be_whole_words_stays_apart(decode, shape, tail):
    g, _ = _mlp_graph(*shape, tail=tail)
    ops = [d.op for d in lower(g, features=[DECODE_HINT + decode]).dispatches]
    assert ops[0] == PAIRED and len(ops) == 2 and ops[1].startswith("fused:quantize")


def test_a_gate_read_elsewhere_stays_apart():
    g, _ = _mlp_graph(4, 16, 8, gate_read_twice=True)
    assert [d.op for d in lower(g).dispatches] == [DUAL + "+sigmoid+mul", DUAL + "+mul"]
    tiled, _ = _mlp_graph(9, 16, 8)   # > 8 rows: the tiled kernels, apart
    assert [d.op for d in lower(tiled).dispatches] == [DUAL + "+sigmoid+mul", DUAL + "+mul"]
