"""aten.bmm.default / aten.linear.default: odd sizes, multi-tile, bias or none, bad shapes."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _bmm_graph(B, M, K, N):
    g = GraphBuilder()
    a, b = g.tensor(np.float32, (B, M, K)), g.tensor(np.float32, (B, K, N))
    o = g.tensor(np.float32, (B, M, N))
    g.op("aten.bmm.default", a, b, o)
    return g.build([a, b], [o])


def _loop_matmul(a, b):
    # Independent of np.matmul: broadcast products summed over k, in float64.
    return (a.astype(np.float64)[..., :, :, None] * b.astype(np.float64)[..., None, :, :]).sum(-2)


@pytest.mark.parametrize("B,M,K,N", [
    (3, 7, 33, 19),     # odd everywhere, below one tile
    (1, 1, 1, 1),       # size-1 dims
    (2, 70, 45, 131),   # several tiles in m and n, K not a multiple of the k tile
    (2, 64, 64, 64),    # exact tiles: the unchecked fast path
    (1, 5, 130, 3),     # small M variant, long K
    (2, 70, 36, 132),   # vec4 tile loads (K, N multiples of 4) with ragged m, n and k edges
    (1, 40, 203, 50),   # the 64x64 tile (8x8 blocks): above the small-product block
    (1, 130, 41, 60),   # the 128x64 tile
])
def test_bmm(gpu, rng, B, M, K, N):
    graph, blob = _bmm_graph(B, M, K, N)
    xs = [rng.standard_normal((B, M, K)).astype(np.float32),
          rng.standard_normal((B, K, N)).astype(np.float32)]
    (out,), (ref,) = run_graph_both(graph, blob, xs)
    assert_close(ref, _loop_matmul(*xs).astype(np.float32), rel=1e-6, what="reference vs loop")
    assert_close(out, ref, rel=1e-5, what="bmm")


def _linear_graph(rng, xshape, N, bias=True):
    K = xshape[-1]
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    w_arr = rng.standard_normal((N, K)).astype(np.float32)
    b_arr = rng.standard_normal((N,)).astype(np.float32) if bias else None
    w = g.constant(w_arr)
    b = g.constant(b_arr) if bias else g.scalar(None)
    o = g.tensor(np.float32, tuple(xshape[:-1]) + (N,))
    g.op("aten.linear.default", x, w, b, o)
    graph, blob = g.build([x], [o])
    return graph, blob, w_arr, b_arr


@pytest.mark.parametrize("xshape,N,bias", [
    ((7, 33), 19, True),
    ((2, 3, 33), 19, False),     # leading dims flattened into M
    ((1, 131, 70), 67, True),    # several tiles
    ((33,), 5, True),            # 1-D input
    ((4, 64), 128, False),       # small M, exact n tiles
    ((3, 50, 36), 132, True),    # vec4 loads of x and W with ragged edges
    ((5, 601), 130, True),       # few rows of many: the 16x128 tile (4x16 blocks)
])
def test_linear(gpu, rng, xshape, N, bias):
    graph, blob, w, b = _linear_graph(rng, xshape, N, bias)
    x = rng.standard_normal(xshape).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    expect = _loop_matmul(x.reshape(-1, x.shape[-1]), w.T).reshape(ref.shape)
    if bias:
        expect = expect + b
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs loop")
    assert_close(out, ref, rel=1e-5, what="linear")


def test_bmm_shape_mismatch_is_unsupported():
    g = GraphBuilder()
    a, b = g.tensor(np.float32, (2, 3, 4)), g.tensor(np.float32, (2, 5, 6))
    o = g.tensor(np.float32, (2, 3, 6))
    g.op("aten.bmm.default", a, b, o)
    graph, _ = g.build([a, b], [o])
    with pytest.raises(UnsupportedOpError, match=r"bmm needs \[B,M,K\] x \[B,K,N\]"):
        lower(graph)


def test_bmm_int_is_unsupported():
    g = GraphBuilder()
    a, b = g.tensor(np.int32, (1, 3, 4)), g.tensor(np.int32, (1, 4, 2))
    o = g.tensor(np.int32, (1, 3, 2))
    g.op("aten.bmm.default", a, b, o)
    graph, _ = g.build([a, b], [o])
    with pytest.raises(UnsupportedOpError, match="float32 only"):
        lower(graph)


def test_linear_bad_bias_is_unsupported(rng):
    g = GraphBuilder()
    x = g.tensor(np.float32, (3, 8))
    w = g.constant(rng.standard_normal((5, 8)).astype(np.float32))
    b = g.constant(rng.standard_normal((4,)).astype(np.float32))
    o = g.tensor(np.float32, (3, 5))
    g.op("aten.linear.default", x, w, b, o)
    graph, _ = g.build([x], [o])
    with pytest.raises(UnsupportedOpError, match=r"bias must be \[5\]"):
        lower(graph)


def _addmm_graph(rng, M, K, N, bias_shape, beta=1.0, alpha=1.0):
    g = GraphBuilder()
    a, b = g.tensor(np.float32, (M, K)), g.tensor(np.float32, (K, N))
    bias_arr = rng.standard_normal(bias_shape).astype(np.float32)
    o = g.tensor(np.float32, (M, N))
    g.op("aten.addmm.default", g.constant(bias_arr), a, b, g.scalar(beta), g.scalar(alpha), o)
    graph, blob = g.build([a, b], [o])
    return graph, blob, bias_arr


@pytest.mark.parametrize("M,K,N,bias_shape,beta", [
    (4, 15, 32, (32,), 1.0),      # the catalog's odd K
    (7, 33, 19, (1, 19), 1.0),    # [1, N] bias, odd everywhere
    (70, 36, 132, (70, 1), 1.0),  # per-row bias, several tiles, vec4 loads
    (1, 1, 1, (1,), 1.0),         # size-1 dims
    (5, 9, 3, (3,), 0.0),         # beta 0: the bias is not read
])
def test_addmm(gpu, rng, M, K, N, bias_shape, beta):
    graph, blob, bias = _addmm_graph(rng, M, K, N, bias_shape, beta=beta)
    xs = [rng.standard_normal((M, K)).astype(np.float32),
          rng.standard_normal((K, N)).astype(np.float32)]
    (out,), (ref,) = run_graph_both(graph, blob, xs)
    expect = _loop_matmul(*xs) + beta * bias.astype(np.float64)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs loop")
    assert_close(out, ref, rel=1e-5, what="addmm")


@pytest.mark.parametrize("bias_shape,beta,alpha,match", [
    ((3,), 1.0, 2.0, "alpha=2.0"),
    ((3,), 0.5, 1.0, "beta=0.5"),
    ((4, 3), 1.0, 1.0, r"bias \[4, 3\]"),
])
def test_addmm_unsupported_forms(rng, bias_shape, beta, alpha, match):
    graph, _, _ = _addmm_graph(rng, 4, 5, 3, bias_shape, beta=beta, alpha=alpha)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(graph)


@pytest.mark.parametrize("a_fill,b_fill", [("scalar", "scalar"), ("k4", "t4")])
def test_tile_loads_are_branch_free(a_fill, b_fill):
    """The edge checks of the operand loads are selects: as early returns, inlined into the
    32 loads of a 4x16 tile's fill, SwiftShader took minutes to compile the pipeline and
    Chromium lost its GPU side (MobileNetV3's 1x1 convolutions in the page)."""
    import re

    from webpte.kernels.render import render
    src = render("matmul/matmul", what="bmm", batch=1, M=5, N=3137, K=18, TM=16, TN=128, TK=8,
                 RM=4, RN=16, a_strides=[0, 18, 1], b_strides=[0, 3137, 1], a_fill=a_fill,
                 b_fill=b_fill, a_k_fast=True, b_k_fast=False, check_m=True, check_n=True,
                 check_k=True, bias="none", b_layout="strided")
    helpers = re.findall(r"fn [ab]_at4?\(.*?\n}", src, re.S)
    assert len(helpers) == 2
    for fn in helpers:
        assert "select(" in fn and fn.count("return") == 1, fn
        assert not re.search(r"\bif\b|&&|\|\|", fn), fn


def test_small_products_take_the_small_block():
    from webpte.kernels.matmul.matmul import SMALL_PRODUCT_MACS, pick_tile
    assert pick_tile(288, 9, 48)[3:] == (4, 8)     # a MobileNetV3 1x1 convolution
    assert pick_tile(64, 64, 64) == (16, 64, 8, 4, 8)
    assert 64 * 64 * 65 > SMALL_PRODUCT_MACS and pick_tile(64, 64, 65)[3:] == (8, 8)
    assert pick_tile(70, 131, 45) == (128, 128, 8, 8, 16)
