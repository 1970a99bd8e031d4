"""4-bit weight linears: linear_qcs4w (f32 activations) and linear_dq8ca_q4gsw (dynamically
quantized int8 activations, exact int32 accumulators)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_q8 import require_dot4
from test_op_qparams import torch_formula
from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.quantized.linear_q4 import dq8ca_q4gsw_reference
from webpte.kernels.quantized.linear_q8 import DOT4_FEATURE
from webpte.kernels.quantized.qparams import choose_qparams_reference
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
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


def _f32(bits):
    return np.array([bits], np.uint32).view(np.float32)[0]


# Rows (row min, row max, probe) whose quantization sits on a rounding step, with what each
# must give: (column 0 = min, 1 = max, 2 = probe; expected q - zp there). torchao's arithmetic
# (choose_qparams_affine, then clamp(round(x * f32(1/scale)) + zp)) gives these; the torch
# test below checks that on torchao itself.
ROUNDING_ROWS = [
    # A 2-layer Llama-3.2-1B-shaped 8da4w decoder, call 1, layer 1's wo input, row 3: the
    # attention output differs from eager's by <= 4 f32 ulps, min and max by one; x * (1/scale)
    # is -19.499998 on one, -19.500008 on the other, so q is one step apart and the logits end
    # 5.4e-3 rel-L2 apart. Each side quantizes its own x exactly as torchao does.
    ("tie below", _f32(0xBF6B7D21), _f32(0x3F962975), _f32(0xBE23E548), (2, -19)),
    ("tie above", _f32(0xBF6B7D22), _f32(0x3F962974), _f32(0xBE23E54C), (2, -20)),
    # x * f32(1/scale) is exactly -6.5 (half to even: -6); x / scale would be -6.5000005 (-7).
    ("times reciprocal", np.float32(-1.6295055150985718), np.float32(1.635087490081787),
     np.float32(-0.0832151249051094), (2, -6)),
    # round(max / scale) + zp = 128 clamps to 127; round(min / scale) + zp = -129 to -128.
    ("clamp high", np.float32(-1.95967435836792), np.float32(0.35919782519340515),
     np.float32(0.1), (1, 39)),
    ("clamp low", np.float32(-1.7940858602523804), np.float32(1.0040298700332642),
     np.float32(0.1), (0, -163)),
]


def rounding_rows(k):
    """(rows, k) f32: min, max and probe in columns 0-2, then values strictly inside the row's
    range (they set neither scale nor zero point)."""
    x = np.empty((len(ROUNDING_ROWS), k), np.float32)
    for i, (_, lo, hi, probe, _) in enumerate(ROUNDING_ROWS):
        x[i, :3] = lo, hi, probe
        x[i, 3:] = np.linspace(np.float32(0.9) * lo, np.float32(0.9) * hi, k - 3)
    return x


def torchao_steps(x):
    """(q - zp (rows, k) int64, scale f32) with torchao's per-row asymmetric int8 arithmetic."""
    k = x.shape[1]
    s, z = torch_formula(x, (1, k), "ASYMMETRIC", -128, 127)
    q = np.clip(np.round(x * (np.float32(1) / s)[:, None]) + z[:, None], -128, 127)
    return (q - z[:, None]).astype(np.int64), s


@pytest.mark.parametrize("features", VARIANTS)
def test_dq8ca_rounding_steps(gpu, rng, features):
    # Output columns 0-2 read x's columns 2, 1, 0 through a weight of 1 at unit scales:
    # out = f32(q - zp) * scale exactly, so one quantization step apart is visible.
    k, n, gs = 32, 8, 16
    w, sums, scales = q4gsw_operands(rng, n, k, gs)
    w[:3] = 0
    w[0, 2] = w[1, 1] = w[2, 0] = 1
    sums[:, :n] = w.astype(np.int32).reshape(n, -1, gs).sum(2).T
    scales[:, :3] = 1
    graph, blob = dq8ca_graph(w, sums, scales, gs, (len(ROUNDING_ROWS),))
    x = rounding_rows(k)
    steps, s = torchao_steps(x)
    for row, (name, *_, (col, want)) in zip(steps, ROUNDING_ROWS, strict=True):
        assert row[col] == want, f"{name}: torchao's formula gives {row[col]}, not {want}"
    (out,), (ref,) = run_features(graph, blob, [x], features)
    expect = steps[:, [2, 1, 0]].astype(np.float32) * s[:, None]
    assert_close(ref[:, :3], expect, exact=True, what="reference rounding steps")
    assert_close(out[:, :3], expect, exact=True, what="rounding steps")
    wd = w.astype(np.float64) * np.repeat(scales[:, :n].T, gs, axis=1)
    full = (steps * s[:, None].astype(np.float64)) @ wd.T
    assert_close(ref, full.astype(np.float32), rel=1e-6, what="reference vs fake-quant")
    assert_close(out, ref, rel=1e-6, what="dq8ca")


def test_dq8ca_is_torchaos_8da4w_linear(rng):
    # The op's golden is the converted eager module (ExecuTorch's WebGPU op tests): torchao's
    # Int8DynamicActivationIntxWeightConfig(int4, PerGroup) linear. Same x: same scale, zero
    # point and int8 x as torchao, bit for bit; the output up to f32 summation order.
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_primitives import (
        MappingType,
        choose_qparams_affine,
        quantize_affine,
    )

    k, n, gs = 64, 24, 32
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n)
    quantize_(lin, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                         weight_granularity=PerGroup(gs)))
    w = lin.weight.qdata.numpy()  # (N, K) int8 in [-8, 7]
    assert not lin.weight.zero_point.numpy().any()
    sums = w.astype(np.int32).reshape(n, -1, gs).sum(2).T.copy()  # (G, N)
    wscale = lin.weight.scale.detach().numpy().T.copy()  # (G, N)
    bias = lin.bias.detach().numpy()
    m = int(rng.integers(8, 12))
    graph, blob = dq8ca_graph(w, sums, wscale, gs, (m,), bias=bias)
    x = (rng.standard_normal((m, k)) * np.exp(rng.uniform(-6, 6, (m, 1)))).astype(np.float32)
    x[: len(ROUNDING_ROWS)] = rounding_rows(k)
    x[-1] = np.abs(x[-1])  # a row without negatives: zero point -128
    env = run_reference(graph, {graph.input_ids[0]: x}, blob)
    (out,) = (env.get(v) for v in graph.output_ids)

    t = torch.from_numpy(x)
    s, z = choose_qparams_affine(t, MappingType.ASYMMETRIC, [1, k], torch.int8, -128, 127,
                                 zero_point_dtype=torch.int8)
    q = quantize_affine(t, [1, k], s, z, torch.int8, -128, 127).numpy().astype(np.int64)
    ours_s, ours_z = choose_qparams_reference(x, "ASYMMETRIC", -128, 127, 2.0 ** -126)
    assert_close(ours_s, s.numpy(), exact=True, what="scales")
    assert_close(ours_z.astype(np.int8), z.numpy(), exact=True, what="zero points")
    _, acc = dq8ca_q4gsw_reference(x, ours_s, ours_z, w, sums, wscale, gs, None)
    torch_acc = np.einsum("mgk,ngk->gmn", q.reshape(m, -1, gs),
                          w.astype(np.int64).reshape(n, -1, gs))
    assert_close(acc, torch_acc, exact=True, what="int8 x int4 accumulators")
    assert_close(torchao_steps(x)[0], q - z.numpy().astype(np.int64)[:, None], exact=True,
                 what="the tests' formula")
    with torch.no_grad():
        eager = lin(t).numpy()
    assert_close(out, eager, rel=1e-6, atol=1e-6 * float(np.abs(eager).max()),
                 what="dq8ca vs torchao eager")
