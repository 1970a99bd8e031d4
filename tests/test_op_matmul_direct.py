"""The untiled f32 matmul CPU adapters get (hint f32_gemm:direct): odd batch, M
and N edges, biases; products it does not fit keep the tiled kernel."""

import numpy as np
import pytest

from harness import assert_close
from webpte.kernels.matmul.matmul import DIRECT_MAX_K, F32_GEMM_DIRECT
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _bmm(B, M, K, N):
    g = GraphBuilder()
    a, b = g.tensor(np.float32, (B, M, K)), g.tensor(np.float32, (B, K, N))
    o = g.tensor(np.float32, (B, M, N))
    g.op("aten.bmm.default", a, b, o)
    return g.build([a, b], [o])


def _addmm(rng, M, K, N, bias_shape):
    g = GraphBuilder()
    a, b = g.tensor(np.float32, (M, K)), g.tensor(np.float32, (K, N))
    o = g.tensor(np.float32, (M, N))
    bias = g.constant(rng.standard_normal(bias_shape).astype(np.float32))
    g.op("aten.addmm.default", bias, a, b, g.scalar(1.0), g.scalar(1.0), o)
    return g.build([a, b], [o])


def _run(graph, blob, xs, features):
    plan = lower(graph, features=features)
    ex = Executor(plan, blob)
    ex.poison()
    return ex.run(xs)[0], [k.name.rsplit("_", 1)[0] for k in plan.kernels]


def _check(graph, blob, xs):
    env = run_reference(graph, dict(zip(graph.input_ids, xs, strict=True)), blob)
    ref = env.get(graph.output_ids[0])
    direct, names = _run(graph, blob, xs, [F32_GEMM_DIRECT])
    tiled, tiled_names = _run(graph, blob, xs, [])
    assert names == ["matmul_direct"] and tiled_names == ["matmul"]
    assert_close(direct, ref, rel=1e-6, what="direct vs reference")
    assert_close(direct, tiled, rel=1e-6, what="direct vs tiled")


@pytest.mark.parametrize("B,M,K,N", [
    (3, 37, 44, 20),    # ragged rows (37 = 4 * 8 + 5) and columns (20 = one 16 block + 4)
    (2, 1, 4, 4),       # one row, the smallest K and N
    (1, 70, 64, 132),   # several workgroups in x and y, attention-score K
    (2, 21, 260, 24),   # long K: 16x8 blocks, ragged rows and columns
    (1, 9, DIRECT_MAX_K, 8),
])
def test_direct_bmm(gpu, rng, B, M, K, N):
    graph, blob = _bmm(B, M, K, N)
    xs = [rng.standard_normal((B, M, K)).astype(np.float32),
          rng.standard_normal((B, K, N)).astype(np.float32)]
    _check(graph, blob, xs)


@pytest.mark.parametrize("bias_shape", [(36,), (11, 1)])
def test_direct_addmm_bias(gpu, rng, bias_shape):
    graph, blob = _addmm(rng, 11, 12, 36, bias_shape)
    xs = [rng.standard_normal((11, 12)).astype(np.float32),
          rng.standard_normal((12, 36)).astype(np.float32)]
    _check(graph, blob, xs)


@pytest.mark.parametrize("B,M,K,N", [
    (1, 8, 6, 8),                   # K not a multiple of 4
    (1, 8, 8, 6),                   # N not a multiple of 4
    (1, 8, DIRECT_MAX_K + 4, 8),    # K past the longest measured
])
def test_tiled_where_direct_does_not_fit(B, M, K, N):
    graph, _ = _bmm(B, M, K, N)
    names = [k.name.rsplit("_", 1)[0] for k in lower(graph, features=[F32_GEMM_DIRECT]).kernels]
    assert names == ["matmul"]
