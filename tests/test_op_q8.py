"""quantize_per_tensor and linear_q8ta_q8csw: exact int8 math, both accumulation variants."""

import numpy as np
import pytest

from harness import assert_close, rel_l2, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.quantized.linear_q8 import DOT4_FEATURE, GEMM_HINT, GEMM_VARIANTS
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"
LINEAR = "et_vk.linear_q8ta_q8csw.default"
VARIANTS = [pytest.param((), id="portable"), pytest.param((DOT4_FEATURE,), id="dot4")]


def require_dot4() -> None:
    """Skip where the device's WGSL compiler rejects dot4I8Packed."""
    from webpte.native import get_device
    src = ("@group(0) @binding(0) var<storage, read_write> o: array<i32>;\n"
           "@compute @workgroup_size(1) fn main() { o[0] = dot4I8Packed(1u, 1u); }\n")
    try:
        get_device().create_shader_module(code=src)
    except Exception as e:  # wgpu reports WGSL errors as its own types
        pytest.skip(f"dot4I8Packed does not compile here: {e}")


def run_both(graph, blob, inputs, features=()):
    """run_graph_both with lowering features: (native outputs, reference outputs)."""
    if not features:
        return run_graph_both(graph, blob, inputs)
    require_dot4()
    plan = lower(graph, features=features)
    assert any("dot4I8Packed" in k.wgsl for k in plan.kernels)
    ex = Executor(plan, blob)
    ex.poison()
    native = ex.run(inputs)
    env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob)
    return native, [env.get(v) for v in graph.output_ids]


def q_ref(x, scale, zp, qmin=-128, qmax=127):
    """torch's quantize_per_tensor written independently: f32 multiply by f32(1/scale)."""
    inv = np.float32(1.0 / scale)
    return np.clip(np.round(x.astype(np.float32) * inv) + np.float32(zp), qmin, qmax)


def quantize_graph(shape, scale, zp, qmin=-128, qmax=127, out_dtype=np.int8, in_dtype=np.float32):
    b = GraphBuilder()
    x, o = b.tensor(in_dtype, shape), b.tensor(out_dtype, shape)
    b.op(QUANTIZE, x, b.scalar(scale), b.scalar(zp), b.scalar(qmin), b.scalar(qmax),
         b.scalar(None), o)
    return b.build([x], [o])


def linear_operands(rng, n, k, *, unit_scales=False):
    """W (N, K) int8 and its per-channel sums/scales/bias padded to N4 like the exporter."""
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    n4 = -(-n // 4) * 4
    sums = np.zeros(n4, np.int32)
    sums[:n] = w.astype(np.int64).sum(1)
    scales = np.zeros(n4, np.float32)
    scales[:n] = 1.0 if unit_scales else rng.uniform(2e-3, 2e-2, n)
    bias = np.zeros(n4, np.float32)
    bias[:n] = rng.standard_normal(n)
    return w, sums, scales, bias


def linear_graph(m, k, ops, scale, zp, *, bias=True, x_dtype=np.int8, lead=()):
    w, sums, scales, b_vals = ops
    b = GraphBuilder()
    x = b.tensor(x_dtype, (*lead, m, k))
    o = b.tensor(np.float32, (*lead, m, w.shape[0]))
    b.op(LINEAR, x, b.scalar(scale), b.scalar(zp), b.constant(w), b.constant(sums),
         b.constant(scales), b.constant(b_vals) if bias else b.scalar(None), o)
    return b.build([x], [o])


def int8(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


# --- quantize_per_tensor ---------------------------------------------------------------

@pytest.mark.parametrize("shape,scale,zp", [
    ((3, 7, 5), 0.0123456789, 0),
    ((1,), 0.1 / 3, -5),
    ((259, 5), 0.0071, 3),          # 324 words: more than one workgroup
    ((2, 1, 13), 1.7, 127),
])
def test_quantize_matches_torch_formula(gpu, rng, shape, scale, zp):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    g, blob = quantize_graph(shape, scale, zp)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, q_ref(x, scale, zp).astype(np.int8), exact=True, what="reference vs numpy")
    assert_close(out, ref, exact=True, what="quantize")


def test_quantize_ties_round_half_even(gpu):
    # x * f32(1/scale) lands exactly on .5: with scale 0.5 (inv 2) and with scale 0.1
    # (inv f32(10)) for values whose f32 product is exactly k + 0.5.
    halves = np.arange(-6, 6, dtype=np.float32) + np.float32(0.5)
    x2 = halves / np.float32(2)
    inv10 = np.float32(1 / 0.1)
    cand = (np.arange(-40, 40, dtype=np.float32) + np.float32(0.5)) / inv10
    x10 = cand[(cand * inv10) % 1 == 0.5]
    assert x10.size >= 10
    for scale, x in ((0.5, x2), (0.1, x10)):
        g, blob = quantize_graph(x.shape, scale, 0)
        (out,), (ref,) = run_graph_both(g, blob, [x])
        even = np.round(x * np.float32(1 / scale)).astype(np.int8)  # numpy rounds half to even
        assert (np.abs(even.astype(np.int32)) % 2 == 0).all()
        assert_close(ref, even, exact=True, what="reference ties")
        assert_close(out, even, exact=True, what=f"ties at scale {scale}")


def test_quantize_clamps(gpu):
    x = np.array([1000.0, -1000.0, 1.26, -1.29, 1.2, -1.3, 0.0, 3e30, -3e30, 0.5, -0.7],
                 np.float32)
    g, blob = quantize_graph(x.shape, 0.01, 4, -100, 120)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, np.array([120, -100, 120, -100, 120, -100, 4, 120, -100, 54, -66],
                               np.int8),
                 exact=True, what="reference clamp")
    assert_close(out, ref, exact=True, what="clamp")


def test_quantize_uint8(gpu, rng):
    x = rng.uniform(-1, 3, (5, 11)).astype(np.float32)
    g, blob = quantize_graph(x.shape, 0.01, 20, 0, 255, out_dtype=np.uint8)
    (out,), (ref,) = run_graph_both(g, blob, [x])
    assert_close(ref, q_ref(x, 0.01, 20, 0, 255).astype(np.uint8), exact=True)
    assert_close(out, ref, exact=True)


def test_quantize_formula_is_torchs(rng):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.ao.quantization.fx._decomposed")
    x = (rng.standard_normal(200_000) * 3).astype(np.float32)
    for scale, zp in ((0.0123456789, 3), (0.1 / 3, -2), (0.0071, 0)):
        got = torch.ops.quantized_decomposed.quantize_per_tensor(
            torch.from_numpy(x), scale, zp, -128, 127, torch.int8).numpy()
        assert_close(q_ref(x, scale, zp).astype(np.int8), got, exact=True, what=f"s={scale}")


def test_quantize_unsupported_forms():
    g, blob = quantize_graph((4,), 0.1, 0, in_dtype=np.int32)
    with pytest.raises(UnsupportedOpError, match="only float32"):
        lower(g)
    g, blob = quantize_graph((4,), 0.1, 0, 0, 300, out_dtype=np.uint8)
    with pytest.raises(UnsupportedOpError, match="does not fit"):
        lower(g)
    g, blob = quantize_graph((4,), 0.0, 0)
    with pytest.raises(PlanError, match="scale must be positive"):
        lower(g)


# --- linear_q8ta_q8csw -----------------------------------------------------------------

ACC_CASES = [  # (M, K, N): odd M, K % 16 != 0, N % 4 != 0, more than one workgroup
    (1, 4, 1), (3, 12, 5), (7, 36, 19), (33, 100, 67), (1, 772, 67), (3, 772, 300),
    (7, 100, 131), (70, 36, 131), (33, 772, 5),
    # decoder windows (<= 8 rows, the skinny kernel), K % 16 == 0 reads vec4 words
    (4, 960, 67), (8, 48, 259), (9, 64, 5),
]


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("m,k,n", ACC_CASES)
def test_linear_accumulators_exact(gpu, rng, features, m, k, n):
    # scale 1, zp 0, weight scales 1, no bias: y is the i32 accumulator, exact in f32.
    ops = linear_operands(rng, n, k, unit_scales=True)
    g, blob = linear_graph(m, k, ops, 1.0, 0, bias=False)
    x = int8(rng, (m, k))
    (out,), (ref,) = run_both(g, blob, [x], features)
    acc = x.astype(np.int64) @ ops[0].astype(np.int64).T
    assert_close(ref, acc.astype(np.float32), exact=True, what="reference vs int64 matmul")
    assert_close(out, ref, exact=True, what="accumulators")


@pytest.mark.parametrize("k", [68, 80], ids=["words", "vec4_words"])
@pytest.mark.parametrize("variant", GEMM_VARIANTS)
@pytest.mark.parametrize("x_float", [False, True], ids=["int8_x", "float_x"])
def test_linear_gemm_variants_exact(gpu, rng, variant, x_float, k):
    """Each many-row tile (the planner picks per adapter) gives the reference's accumulators
    exactly, a float x quantized in the kernel included; 150 rows and 300 columns leave
    partial tiles, K = 68 a partial K step, K = 80 lets the direct tile read vec4 words."""
    m, n = 150, 300
    ops = linear_operands(rng, n, k, unit_scales=True)
    x = (rng.standard_normal((m, k)) * 40).astype(np.float32) if x_float else int8(rng, (m, k))
    g, blob = linear_graph(m, k, ops, 1.0, 0, bias=False,
                           x_dtype=np.float32 if x_float else np.int8)
    (out,), (ref,) = run_both(g, blob, [x], (DOT4_FEATURE, GEMM_HINT + variant))
    assert_close(out, ref, exact=True, what=f"{variant} accumulators")


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("zp", [-7, 5, 127])
def test_linear_zero_point_exact(gpu, rng, features, zp):
    m, k, n = 7, 100, 19
    ops = linear_operands(rng, n, k, unit_scales=True)
    g, blob = linear_graph(m, k, ops, 1.0, zp, bias=False)
    x = int8(rng, (m, k))
    (out,), (ref,) = run_both(g, blob, [x], features)
    w = ops[0].astype(np.int64)
    expect = (x.astype(np.int64) - zp) @ w.T  # sum_k (x - zp) * W
    assert_close(ref, expect.astype(np.float32), exact=True, what="reference vs (x - zp) W")
    assert_close(out, ref, exact=True, what="zero-point adjusted accumulators")


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("m,k,n,bias,lead", [
    (33, 772, 67, True, ()), (3, 36, 5, False, ()), (4, 960, 131, True, (1,)),
    (7, 12, 1, True, (1,)), (4, 16, 9, True, (1,)),
])
def test_linear_real_scales(gpu, rng, features, m, k, n, bias, lead):
    scale, zp = 0.0213, 3
    ops = linear_operands(rng, n, k)
    g, blob = linear_graph(m, k, ops, scale, zp, bias=bias, lead=lead)
    x = int8(rng, (*lead, m, k))
    (out,), (ref,) = run_both(g, blob, [x], features)
    w, sums, scales, b_vals = ops
    deq = (x.astype(np.float64) - zp) @ (w.astype(np.float64) * scales[:n, None]).T * scale
    if bias:
        deq += b_vals[:n]
    assert rel_l2(ref, deq) <= 1e-6, "reference vs float64 dequantized linear"
    assert_close(out, ref, rel=1e-6, what="linear")


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("m,k,n", [(33, 100, 67), (3, 36, 5), (4, 64, 7)])
def test_linear_float_input(gpu, rng, features, m, k, n):
    # A float x is quantized in the kernel: same result as quantize_per_tensor + linear.
    scale, zp = 0.0137, -4
    ops = linear_operands(rng, n, k)
    x = (rng.standard_normal((m, k)) * 0.8).astype(np.float32)
    g, blob = linear_graph(m, k, ops, scale, zp, x_dtype=np.float32)
    (fused,), (ref,) = run_both(g, blob, [x], features)

    w, sums, scales, b_vals = ops
    b = GraphBuilder()
    xf, xq, o = b.tensor(np.float32, (m, k)), b.tensor(np.int8, (m, k)), b.tensor(np.float32,
                                                                                   (m, n))
    b.op(QUANTIZE, xf, b.scalar(scale), b.scalar(zp), b.scalar(-128), b.scalar(127),
         b.scalar(None), xq)
    b.op(LINEAR, xq, b.scalar(scale), b.scalar(zp), b.constant(w), b.constant(sums),
         b.constant(scales), b.constant(b_vals), o)
    g2, blob2 = b.build([xf], [o])
    (two_ops,), (ref2,) = run_both(g2, blob2, [x], features)
    assert_close(ref, ref2, exact=True, what="reference: fused vs quantize + linear")
    assert_close(fused, two_ops, exact=True, what="native: fused vs quantize + linear")
    assert_close(fused, ref, rel=1e-6, what="float-input linear")


def test_linear_variants_render():
    ops = linear_operands(np.random.default_rng(0), 5, 8)
    g, _ = linear_graph(3, 8, ops, 0.1, 0)
    portable = lower(g).kernels[0].wgsl
    dot4 = lower(g, features=[DOT4_FEATURE]).kernels[0].wgsl
    assert "dot4I8Packed" not in portable and "fn unpack" in portable
    assert "dot4I8Packed" in dot4 and "fn unpack" not in dot4


def test_linear_unsupported_forms():
    rng = np.random.default_rng(1)
    ops = linear_operands(rng, 5, 6)
    g, _ = linear_graph(3, 6, ops, 0.1, 0)
    with pytest.raises(UnsupportedOpError, match="multiple of 4"):
        lower(g)
    ops = linear_operands(rng, 5, 8)
    g, _ = linear_graph(3, 8, ops, 0.1, 0, x_dtype=np.int32)
    with pytest.raises(UnsupportedOpError, match="dtypes"):
        lower(g)
    b = GraphBuilder()
    x, o = b.tensor(np.int8, (3, 8)), b.tensor(np.float32, (3, 4))
    b.op(LINEAR, x, b.scalar(0.1), b.scalar(0), b.constant(ops[0]), b.constant(ops[1]),
         b.constant(ops[2]), b.scalar(None), o)
    with pytest.raises(UnsupportedOpError, match="W\\[N, K\\]"):
        lower(b.build([x], [o])[0])


# -- dequantize_per_tensor ------------------------------------------------------------------

DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.default"


def dequantize_graph(b, x, shape, scale, zp, qmin=-128, qmax=127):
    o = b.tensor(np.float32, shape)
    b.op(DEQUANTIZE, x, b.scalar(scale), b.scalar(zp), b.scalar(qmin), b.scalar(qmax),
         b.scalar(None), b.scalar(None), o)
    return o


@pytest.mark.parametrize("shape,dtype,scale,zp", [
    ((37,), np.int8, 0.05, 0),
    ((3, 5, 7), np.int8, 0.1, 7),
    ((1,), np.int8, 0.013, -128),
    ((2, 9), np.uint8, 0.2, 128),
])
def test_dequantize_matches_torch_formula(gpu, rng, shape, dtype, scale, zp):
    b = GraphBuilder()
    info = np.iinfo(dtype)
    x = b.tensor(dtype, shape)
    o = dequantize_graph(b, x, shape, scale, zp, info.min, info.max)
    graph, blob = b.build([x], [o])
    q = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    q.flat[:2] = [info.min, info.max][: q.size]
    (out,), (ref,) = run_graph_both(graph, blob, [q])
    # float64 product of two f32 values is exact: one rounding, as torch's f32 multiply.
    expect = ((q.astype(np.float64) - zp) * np.float64(np.float32(scale))).astype(np.float32)
    assert_close(ref, expect, exact=True, what="reference vs formula")
    assert_close(out, ref, exact=True, what="dequantize")


def test_dequantize_fuses_with_elementwise(gpu, rng):
    # dequantize -> mul: one fused dispatch, bit-identical to the op-by-op reference.
    b = GraphBuilder()
    x, y = b.tensor(np.int8, (5, 13)), b.tensor(np.float32, (5, 13))
    d = dequantize_graph(b, x, (5, 13), 0.07, -3)
    o = b.tensor(np.float32, (5, 13))
    b.op("aten.mul.Tensor", d, y, o)
    graph, blob = b.build([x, y], [o])
    plan = lower(graph)
    assert len(plan.dispatches) == 1 and "dequantize" in plan.dispatches[0].op
    xs = [int8(rng, (5, 13)), rng.standard_normal((5, 13)).astype(np.float32)]
    (out,), (ref,) = run_graph_both(graph, blob, xs)
    assert_close(out, ref, exact=True, what="fused dequantize*mul")


def test_dequantize_unsupported_forms():
    b = GraphBuilder()
    x = b.tensor(np.int8, (4,))
    o = b.tensor(np.float32, (2, 2))
    b.op(DEQUANTIZE, x, b.scalar(0.1), b.scalar(0), b.scalar(-128), b.scalar(127),
         b.scalar(None), b.scalar(None), o)
    with pytest.raises(UnsupportedOpError, match="differ from input"):
        lower(b.build([x], [o])[0])
    b = GraphBuilder()
    x = b.tensor(np.int8, (4,))
    o = dequantize_graph(b, x, (4,), 1e39, 0)
    with pytest.raises(UnsupportedOpError, match="not a finite f32"):
        lower(b.build([x], [o])[0])
    b = GraphBuilder()
    x = b.tensor(np.float32, (4,))
    o = dequantize_graph(b, x, (4,), 0.1, 0)
    with pytest.raises(PlanError, match="int8/uint8 tensor"):
        lower(b.build([x], [o])[0])
