"""4-bit weight linears: linear_qcs4w (f32 activations) and linear_dq8ca_q4gsw (dynamically
quantized int8 activations, exact int32 accumulators)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_q8 import require_dot4
from test_op_qparams import torch_formula
from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.quantized.linear_q8 import DOT4_FEATURE
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.plan import lower
from webpte.pte.builder import GraphBuilder

QCS4W = "et_vk.linear_qcs4w.default"


def pack_high_first(w):
    """The exporter's qcs4w packing, written independently: (even + 8) << 4 | (odd + 8)."""
    u = (w.astype(np.int16) + 8).astype(np.uint8)
    return (u[:, 0::2] << 4) | u[:, 1::2]


def qcs4w_graph(rng, lead, k, n):
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w.flat[:2] = [-8, 7][: w.size]
    scales = (rng.random(n).astype(np.float32) + 0.5) * np.float32(0.01)
    b = GraphBuilder()
    x = b.tensor(np.float32, lead + (k,))
    o = b.tensor(np.float32, lead + (n,))
    b.op(QCS4W, x, b.constant(pack_high_first(w)), b.constant(scales), o)
    graph, blob = b.build([x], [o])
    return graph, blob, w, scales


@pytest.mark.parametrize("lead,k,n", [
    ((1,), 32, 16),      # the catalog's gemv
    ((4,), 32, 16),      # word-aligned rows, one row block
    ((5,), 18, 7),       # rows of 9 bytes (byte path), a partial row block
    ((2, 9), 64, 70),    # leading dims, two workgroups of columns, several row blocks
    ((1,), 2, 1),        # size-1 dims
])
def test_qcs4w(gpu, rng, lead, k, n):
    graph, blob, w, scales = qcs4w_graph(rng, lead, k, n)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    # The fake-quant linear the golden comes from: x @ (w * scale).T in float64.
    expect = x.astype(np.float64) @ (w.astype(np.float64) * scales[:, None]).T
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs dequantized W")
    assert_close(out, ref, rel=1e-5, what="linear_qcs4w")


def test_qcs4w_bad_shapes():
    b = GraphBuilder()
    x, o = b.tensor(np.float32, (2, 31)), b.tensor(np.float32, (2, 4))
    b.op(QCS4W, x, b.constant(np.zeros((4, 16), np.uint8)),
         b.constant(np.ones(4, np.float32)), o)
    with pytest.raises(UnsupportedOpError, match="K = 31"):
        lower(b.build([x], [o])[0])
    b = GraphBuilder()
    x, o = b.tensor(np.float32, (2, 32)), b.tensor(np.float32, (2, 4))
    b.op(QCS4W, x, b.constant(np.zeros((4, 16), np.uint8)),
         b.constant(np.ones(4, np.int32)), o)
    with pytest.raises(PlanError, match="float32 tensor"):
        lower(b.build([x], [o])[0])


# -- linear_dq8ca_q4gsw -------------------------------------------------------------------

DQ8CA = "et_vk.linear_dq8ca_q4gsw.default"
CHOOSE = "torchao.choose_qparams_affine.default"
VARIANTS = [pytest.param((), id="portable"), pytest.param((DOT4_FEATURE,), id="dot4")]


def pack_low_first(w):
    """The exporter's q4gsw packing, written independently: (odd + 8) << 4 | (even + 8)."""
    u = (w.astype(np.int16) + 8).astype(np.uint8)
    return (u[:, 1::2] << 4) | u[:, 0::2]


def q4gsw_operands(rng, n, k, gs, *, unit_scales=False):
    """W (N, K) in [-8, 7], per-group sums and scales (G, N8) padded like the exporter."""
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w.flat[:2] = [-8, 7]
    n8 = -(-n // 8) * 8
    sums = np.zeros((k // gs, n8), np.int32)
    sums[:, :n] = w.astype(np.int32).reshape(n, -1, gs).sum(2).T
    scales = np.zeros((k // gs, n8), np.float32)
    scales[:, :n] = 1.0 if unit_scales else rng.random((k // gs, n)) * 0.02 + 0.005
    return w, sums, scales


def dq8ca_graph(w, sums, scales, gs, lead, *, bias=None, choose=True):
    """x -> choose_qparams (per row) -> linear_dq8ca_q4gsw, or with scale/zp as inputs."""
    n, k = w.shape
    m = int(np.prod(lead))
    b = GraphBuilder()
    x = b.tensor(np.float32, lead + (k,))
    s, z = b.tensor(np.float32, (m,)), b.tensor(np.int8, (m,))
    if choose:
        b.op(CHOOSE, x, b.scalar("ASYMMETRIC"), b.scalar([1] * len(lead) + [k]), b.scalar(None),
             b.scalar(-128), b.scalar(127), b.scalar(None), b.scalar(None), b.scalar(None),
             b.scalar(False), b.value_list([s, z]))
    o = b.tensor(np.float32, lead + (n,))
    b.op(DQ8CA, x, s, z, b.constant(pack_low_first(w)), b.constant(sums), b.constant(scales),
         b.scalar(gs), b.scalar(None) if bias is None else b.constant(bias), o)
    return b.build([x] if choose else [x, s, z], [o])


def run_features(graph, blob, inputs, features):
    if features:
        require_dot4()
    plan = lower(graph, features=features)
    assert any("dot4I8Packed" in k.wgsl for k in plan.kernels) == bool(features)
    ex = Executor(plan, blob)
    ex.poison()
    native = ex.run(inputs)
    env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob)
    return native, [env.get(v) for v in graph.output_ids]


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("m,k,n,gs", [(1, 64, 16, 32), (5, 48, 7, 16), (9, 128, 70, 64)])
def test_dq8ca_accumulators_exact(gpu, rng, features, m, k, n, gs):
    # Unit scales: every f32 step holds an integer exactly, so out is the i32 accumulator sum.
    w, sums, scales = q4gsw_operands(rng, n, k, gs, unit_scales=True)
    graph, blob = dq8ca_graph(w, sums, scales, gs, (m,), choose=False)
    x = rng.integers(-140, 140, (m, k)).astype(np.float32)
    xs = np.ones(m, np.float32)
    xz = rng.integers(-20, 20, m).astype(np.int8)
    (out,), (ref,) = run_features(graph, blob, [x, xs, xz], features)
    q = np.clip(x.astype(np.int64) + xz[:, None], -128, 127)
    expect = (q - xz[:, None].astype(np.int64)) @ w.astype(np.int64).T
    assert_close(ref, expect.astype(np.float32), exact=True, what="reference vs int64")
    assert_close(out, ref, exact=True, what="dq8ca accumulators")


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("lead,k,n,gs,bias", [
    ((1,), 64, 16, 32, False),    # the catalog's gemv
    ((4,), 64, 16, 32, True),
    ((2, 3), 128, 8, 64, False),  # leading dims: per-row qparams over rank 3
    ((7,), 40, 13, 8, True),      # five groups of 8, N not a multiple of 8, a partial row block
])
def test_dq8ca_after_choose_qparams(gpu, rng, features, lead, k, n, gs, bias):
    w, sums, scales = q4gsw_operands(rng, n, k, gs)
    bias_arr = rng.standard_normal(n).astype(np.float32) if bias else None
    graph, blob = dq8ca_graph(w, sums, scales, gs, lead, bias=bias_arr)
    x = rng.standard_normal(lead + (k,)).astype(np.float32)
    (out,), (ref,) = run_features(graph, blob, [x], features)
    assert_close(out, ref, rel=1e-6, what="dq8ca")
    # Against the fake-quant float linear the golden comes from (float64, torchao formulas).
    rows = x.reshape(-1, k)
    s, z = torch_formula(rows, (1, k), "ASYMMETRIC", -128, 127)
    q = np.clip(np.round(rows * (np.float32(1) / s)[:, None]) + z[:, None], -128, 127)
    wd = w.astype(np.float64) * np.repeat(scales[:, :n].T, gs, axis=1)
    expect = ((q - z[:, None]) * s[:, None].astype(np.float64)) @ wd.T
    if bias:
        expect = expect + bias_arr
    assert_close(ref, expect.reshape(ref.shape).astype(np.float32), rel=1e-5, atol=1e-5,
                 rtol=1e-4, what="reference vs fake-quant")


def test_dq8ca_unsupported_forms(rng):
    w, sums, scales = q4gsw_operands(rng, 8, 48, 16)
    graph, _ = dq8ca_graph(w, sums, scales, 12, (2,))   # 48 % 12 == 0 but 12 % 8 != 0
    with pytest.raises(UnsupportedOpError, match="group size 12"):
        lower(graph)
    graph, _ = dq8ca_graph(w, sums[:2], scales[:2], 16, (2,))
    with pytest.raises(UnsupportedOpError, match=r"weight sums \[2, 8\] should be \[3"):
        lower(graph)
