"""The 4-bit group-wise training ops: et_vk.linear_q4gsw_backward (d_x through frozen packed
weights) and et_vk.q4gsw_requant (latent weights back to packed codes at frozen scales), GPU
against the reference and the reference against float64 formulas written from their
definitions (ExecuTorch `backends/vulkan/custom_ops_lib.py`)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_q4gsw import pack_exporter
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

BACKWARD = "et_vk.linear_q4gsw_backward.default"
REQUANT = "et_vk.q4gsw_requant.default"


def scales_table(rng, n, k, gs, *, zeros=True, negatives=False):
    """scales (G, N4) f32: the transposed layout, padded to 4 columns poisoned with NaN; some
    (group, n) scales zero, some negative when asked."""
    g = -(-k // gs)
    n4 = -(-n // 4) * 4
    s = np.full((g, n4), np.nan, np.float32)
    s[:, :n] = rng.random((g, n)) * 0.02 + 0.005
    if negatives:
        s[:, :n] *= rng.choice([-1, 1], (g, n))
    if zeros and g * n > 1:
        s[rng.integers(0, g, 2), rng.integers(0, n, 2)] = 0
    return s


def unpack_definition(packed, k):
    """`unpack_4bit_weight_tensor`: low nibble to the even column, high to the odd, minus 8,
    cut to K columns."""
    b = packed.astype(np.int64)
    w = np.empty((b.shape[0], 2 * b.shape[1]), np.int64)
    w[:, 0::2], w[:, 1::2] = b & 0x0F, (b >> 4) & 0x0F
    return (w - 8)[:, :k]


# -- linear_q4gsw_backward ------------------------------------------------------------------

def backward_graph(packed, scales, gs, lead, k):
    n = packed.shape[0]
    b = GraphBuilder()
    d = b.tensor(np.float32, lead + (n,))
    o = b.tensor(np.float32, lead + (k,))
    b.op(BACKWARD, d, b.constant(packed), b.constant(scales), b.scalar(gs), o)
    return b.build([d], [o])


def backward_definition(dout, packed, scales, gs, k):
    """d_out @ dequant(W) in float64: W[n, k] = w[n, k] * scales[k // gs, n]."""
    w = unpack_definition(packed, k).astype(np.float64)
    n = w.shape[0]
    wd = w * scales[np.arange(k) // gs, :n].astype(np.float64).T
    return dout.reshape(-1, n).astype(np.float64) @ wd


BACKWARDS = [
    ((1,), 5, 7, 4),          # odd K (last byte holds one weight), group size not dividing K
    ((3,), 13, 37, 8),        # prime K and N, partial last group, partial row block
    ((2, 3), 11, 16, 16),     # leading dims, one group
    ((1,), 1, 1, 1),          # size-1 everything
    ((1, 1, 9), 67, 70, 32),  # rank 4, two workgroups of columns, three row blocks
    ((4,), 97, 129, 7),       # odd group size, a partial last group
]


@pytest.mark.parametrize("lead,n,k,gs", BACKWARDS, ids=[str(c) for c in BACKWARDS])
def test_linear_q4gsw_backward(gpu, rng, lead, n, k, gs):
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    w.flat[:2] = [-8, 7][: w.size]
    packed = pack_exporter(w, pad_to=2)
    if k % 2:
        packed[:, -1] |= 0xF0          # the unused nibble past K is never read
    scales = scales_table(rng, n, k, gs)
    graph, blob = backward_graph(packed, scales, gs, lead, k)
    dout = rng.standard_normal(lead + (n,)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [dout])
    expect = backward_definition(dout, packed, scales, gs, k).reshape(ref.shape)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, atol=1e-6, rtol=1e-5,
                 what="reference vs d_out @ dequant(W)")
    # f32 sums over N in order against float64 sums rounded once
    assert_close(out, ref, rel=1e-5, atol=1e-5, rtol=1e-3, what="linear_q4gsw_backward")


def test_linear_q4gsw_backward_exact_case(gpu):
    # small integers and power-of-two scales: every product and partial sum is exact
    k, gs = 5, 2
    w = np.array([[1, -2, 3, -8, 7], [0, 1, 1, 1, 1], [-1, -1, 2, 2, 5]], np.int8)
    scales = np.array([[0.5, 2.0, 0.0, 9], [0.25, 1.0, 4.0, 9], [8.0, 0.5, 1.0, 9]],
                      np.float32)
    graph, blob = backward_graph(pack_exporter(w, pad_to=2), scales, gs, (2,), k)
    dout = np.array([[1, 2, 3], [-4, 0, 0.5]], np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [dout])
    expect = backward_definition(dout, pack_exporter(w, pad_to=2), scales, gs, k)
    assert_close(ref, expect.astype(np.float32), exact=True, what="reference exact case")
    assert_close(out, expect.astype(np.float32), exact=True, what="backward exact case")


def test_linear_q4gsw_backward_refusals():
    w = np.zeros((4, 16), np.int8)
    graph, _ = backward_graph(pack_exporter(w, pad_to=8), np.ones((3, 4), np.float32), 4,
                              (2,), 16)   # 4 groups of 4, 3 scale rows
    with pytest.raises(UnsupportedOpError, match=r"weight scales \[3, 4\] should be \[>= 4"):
        lower(graph)
    graph, _ = backward_graph(pack_exporter(np.zeros((4, 13), np.int8), pad_to=8),
                              np.ones((2, 4), np.float32), 8, (2,), 13)  # rows of 8 bytes
    with pytest.raises(UnsupportedOpError, match=r"only rows of ceil\(K / 2\) = 7 bytes"):
        lower(graph)
    b = GraphBuilder()
    d, o = b.tensor(np.float32, (2, 4)), b.tensor(np.float32, (3, 8))
    b.op(BACKWARD, d, b.constant(np.zeros((4, 4), np.uint8)), b.constant(np.ones((1, 4),
         np.float32)), b.scalar(8), o)
    with pytest.raises(UnsupportedOpError, match=r"are not d_out\[..., N\]"):
        lower(b.build([d], [o])[0])


# -- q4gsw_requant ---------------------------------------------------------------------------

def requant_graph(scales, gs, n, k):
    b = GraphBuilder()
    lat = b.tensor(np.float32, (n, k))
    o = b.tensor(np.uint8, (n, (k + 1) // 2))
    b.op(REQUANT, lat, b.constant(scales), b.scalar(gs), o)
    return b.build([lat], [o])


def requant_definition(latent, scales, gs):
    """`q4gsw_requant_impl` element by element: the f32 quotient (a float64 division rounded
    to f32 is correctly rounded), Python's half-even round, clamp, +8, two codes a byte."""
    n, k = latent.shape
    out = np.zeros((n, (k + 1) // 2), np.uint8)
    for i in range(n):
        for j in range(k):
            s = float(scales[j // gs, i])
            if s == 0:
                q = 0
            else:
                with np.errstate(over="ignore"):    # beyond f32: inf, as torch's
                    v = float(np.float32(float(latent[i, j]) / s))
                q = -8 if v == -np.inf else 7 if v == np.inf else round(v)
            code = (min(max(q, -8), 7) + 8) & 0xF
            out[i, j // 2] |= code << (4 * (j % 2))
    return out


def tricky_latent(rng, scales, gs, n, k):
    """Latents at w * s for random w in [-10, 10] and halves (x.5 * s: ties, or the nearest
    f32s of ties), their neighbours one ulp away, the clamp ends and infinities."""
    s = scales[np.arange(k) // gs, :n].T
    half = rng.integers(-20, 21, (n, k)).astype(np.float32) / np.float32(2)
    lat = half * s
    pick = rng.random((n, k))
    lat = np.where(pick < 0.15, np.nextafter(lat, np.float32(np.inf)), lat)
    lat = np.where((pick >= 0.15) & (pick < 0.3), np.nextafter(lat, np.float32(-np.inf)), lat)
    lat = np.where(pick > 0.9, rng.standard_normal((n, k)).astype(np.float32) * 0.05, lat)
    ends = np.array([7.5, -8.5, 7.49, -8.49, 6.5, -7.5, 0.5, -0.5, 1e30, -1e30], np.float32)
    flat = lat.reshape(-1)
    sflat = s.reshape(-1)
    for i, e in enumerate(ends[: flat.size]):
        flat[i] = e * sflat[i] if abs(e) < 100 else e
    if flat.size > len(ends) + 1:
        flat[len(ends)], flat[len(ends) + 1] = np.inf, -np.inf
    return np.nan_to_num(lat.reshape(n, k), nan=0.25).astype(np.float32)


REQUANTS = [
    (5, 7, 4),      # odd K: the last byte's high nibble stays 0; group size not dividing K
    (13, 37, 8),    # primes, N * ceil(K / 2) not whole words
    (3, 1, 1),      # one column
    (1, 2, 2),      # one byte
    (17, 64, 32),   # the exporter's shape
    (67, 129, 5),   # several workgroups, odd group size
]


@pytest.mark.parametrize("n,k,gs", REQUANTS, ids=[str(c) for c in REQUANTS])
def test_q4gsw_requant(gpu, rng, n, k, gs):
    scales = scales_table(rng, n, k, gs, negatives=True)
    latent = tricky_latent(rng, scales, gs, n, k)
    graph, blob = requant_graph(scales, gs, n, k)
    (out,), (ref,) = run_graph_both(graph, blob, [latent])
    assert_close(ref, requant_definition(latent, scales, gs), exact=True,
                 what="reference vs q4gsw_requant definition")
    assert_close(out, ref, exact=True, what="q4gsw_requant")


def test_q4gsw_requant_ties_round_half_even(gpu):
    # power-of-two scales: x.5 * s is an exact tie; torch.round goes to the even neighbour
    k = 12
    scales = np.array([[0.25, 2.0 ** -7, 0, 0]], np.float32)
    halves = np.array([-8.5, -7.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 6.5, 7.5, 8.5],
                      np.float32)
    latent = np.stack([halves * np.float32(0.25), halves * np.float32(2.0 ** -7)])
    graph, blob = requant_graph(scales, 12, 2, k)
    (out,), (ref,) = run_graph_both(graph, blob, [latent])
    q = np.array([-8, -8, -2, -2, 0, 0, 2, 2, 4, 6, 7, 7]) + 8
    expect = np.tile((q[0::2] | q[1::2] << 4).astype(np.uint8), (2, 1))
    assert_close(ref, expect, exact=True, what="reference ties")
    assert_close(out, expect, exact=True, what="q4gsw_requant ties")


def test_q4gsw_requant_round_trips_dequantized_codes(gpu, rng):
    n, k, gs = 9, 23, 6
    w = rng.integers(-8, 8, (n, k)).astype(np.int8)
    scales = scales_table(rng, n, k, gs, zeros=False, negatives=True)
    s = scales[np.arange(k) // gs, :n].T
    latent = (w.astype(np.float32) * s).astype(np.float32)
    graph, blob = requant_graph(scales, gs, n, k)
    (out,), (ref,) = run_graph_both(graph, blob, [latent])
    packed = pack_exporter(w, pad_to=2)
    packed[:, -1] &= 0x0F if k % 2 else 0xFF     # requant leaves the nibble past K zero
    assert_close(ref, packed, exact=True, what="reference round trip")
    assert_close(out, packed, exact=True, what="q4gsw_requant round trip")


def test_requant_then_backward(gpu, rng):
    """The training step's pair in one graph: codes written by the GPU feed the backward."""
    n, k, gs, m = 11, 19, 4, 3
    scales = scales_table(rng, n, k, gs)
    b = GraphBuilder()
    lat, d = b.tensor(np.float32, (n, k)), b.tensor(np.float32, (m, n))
    codes, dx = b.tensor(np.uint8, (n, (k + 1) // 2)), b.tensor(np.float32, (m, k))
    sc = b.constant(scales)
    b.op(REQUANT, lat, sc, b.scalar(gs), codes)
    b.op(BACKWARD, d, codes, sc, b.scalar(gs), dx)
    graph, blob = b.build([lat, d], [codes, dx])
    latent = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    dout = rng.standard_normal((m, n)).astype(np.float32)
    (c_out, dx_out), (c_ref, dx_ref) = run_graph_both(graph, blob, [latent, dout])
    assert_close(c_out, requant_definition(latent, scales, gs), exact=True, what="codes")
    expect = backward_definition(dout, c_ref, scales, gs, k)
    assert_close(dx_ref, expect.astype(np.float32), rel=1e-6, atol=1e-6, what="reference d_x")
    assert_close(dx_out, dx_ref, rel=1e-5, atol=1e-5, rtol=1e-3, what="d_x from GPU codes")


def test_q4gsw_requant_refusals():
    with pytest.raises(UnsupportedOpError, match=r"scales \[1, 4\] should be \[>= 2"):
        lower(requant_graph(np.ones((1, 4), np.float32), 8, 4, 9)[0])
    b = GraphBuilder()
    lat, o = b.tensor(np.float32, (4, 9)), b.tensor(np.uint8, (4, 4))
    b.op(REQUANT, lat, b.constant(np.ones((2, 4), np.float32)), b.scalar(8), o)
    with pytest.raises(UnsupportedOpError, match=r"only uint8 \[4, 5\]"):
        lower(b.build([lat], [o])[0])
    b = GraphBuilder()
    lat, o = b.tensor(np.float32, (2, 4, 9)), b.tensor(np.uint8, (4, 5))
    b.op(REQUANT, lat, b.constant(np.ones((2, 4), np.float32)), b.scalar(8), o)
    with pytest.raises(UnsupportedOpError, match=r"only a non-empty \[N, K\]"):
        lower(b.build([lat], [o])[0])
