"""Attention ops without a cache: et_vk.sdpa (fused non-causal attention with GQA and an
additive mask) and et_vk.apply_rotary_emb_interleaved (pair-interleaved RoPE)."""

import math

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.kernels.attention._tiled import WORKGROUP, tiled_attention_reference
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

F32 = np.float32
SDPA = "et_vk.sdpa.default"
ROPE = "et_vk.apply_rotary_emb_interleaved.default"


def _randn(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def _sdpa_graph(qs, ks, mask=None, scale=None, mask_input=False, mask_dtype=F32):
    """q, k, v (and the mask, when `mask_input`) as inputs; a constant mask otherwise."""
    b = GraphBuilder()
    q, k, v = b.tensor(F32, qs), b.tensor(F32, ks), b.tensor(F32, ks)
    inputs = [q, k, v]
    if mask is None:
        m = b.scalar(None)
    elif mask_input:
        m = b.tensor(mask_dtype, mask.shape)
        inputs.append(m)
    else:
        m = b.constant(mask)
    out = b.tensor(F32, qs)
    b.op(SDPA, q, k, v, m, b.scalar(scale), out)
    return b.build(inputs, [out])


def _plain_sdpa(q, k, v, mask, scale):
    """float64 softmax(q k^T * scale + mask) v, kv heads repeated to the query heads."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        scores = scores + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# (q shape, k shape, mask shape or None, scale)
SDPA_CASES = [
    ((1, 4, 8, 16), (1, 4, 8, 16), None, None),              # the catalog's smallest
    ((2, 3, 7, 5), (2, 3, 131, 5), None, None),              # D=5, keys over two tiles
    ((1, 6, 13, 37), (1, 2, 67, 37), (1, 6, 13, 67), 0.3),   # GQA 3:1, a full mask
    ((1, 5, 3, 8), (1, 1, 200, 8), (3, 200), None),          # one kv head, [Sq, Skv] mask
    ((3, 1, 9, 16), (3, 1, 64, 16), (3, 1, 1, 64), None),    # per-batch key mask
    ((2, 1, 5, 130), (2, 1, 1, 130), None, None),            # one key, D over two threads
    ((4, 11, 24), (4, 65, 24), (65,), 0.125),                # rank 3, a [Skv] mask
]


@pytest.mark.parametrize("qs,ks,ms,scale", SDPA_CASES)
def test_sdpa(gpu, rng, qs, ks, ms, scale):
    mask = None if ms is None else np.clip(_randn(rng, ms, 2.0), -3.0, 0.0)
    g, blob = _sdpa_graph(qs, ks, mask, scale)
    xs = [_randn(rng, qs), _randn(rng, ks), _randn(rng, ks)]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    s = 1 / math.sqrt(qs[-1]) if scale is None else scale
    assert_close(ref, _plain_sdpa(*xs, mask, s).astype(F32), rel=2e-6,
                 what=f"reference vs float64 attention {qs} {ks}")
    assert_close(out, ref, rel=1e-5, what=f"sdpa {qs} {ks} mask {ms}")


def test_sdpa_masked_keys_and_runtime_mask(gpu, rng):
    """A -1e30 mask entry removes its key; the mask may be a runtime input too."""
    qs, ks = (1, 2, 6, 8), (1, 2, 70, 8)
    mask = np.where(rng.random((1, 2, 6, 70)) < 0.5, F32(-1e30), F32(0)).astype(F32)
    mask[..., 3] = 0  # every row keeps one key
    g, blob = _sdpa_graph(qs, ks, mask, mask_input=True)
    xs = [_randn(rng, qs), _randn(rng, ks), _randn(rng, ks), mask]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    keep = mask == 0
    plain = np.empty(qs)
    for h in range(2):
        for i in range(6):
            c = np.flatnonzero(keep[0, h, i])
            plain[0, h, i] = _plain_sdpa(xs[0][:, h:h + 1, i:i + 1], xs[1][:, h:h + 1, c],
                                         xs[2][:, h:h + 1, c], None, 1 / math.sqrt(8))[0, 0, 0]
    assert_close(ref, plain.astype(F32), rel=2e-6, what="reference vs kept keys only")
    assert_close(out, ref, rel=1e-5)


def test_tiled_reference_counts_keys_per_row(rng):
    """n_keys limits each row (the cache's causal form): later tiles leave shorter rows be."""
    q, k, v = _randn(rng, (1, 2, 3, 4)), _randn(rng, (1, 1, 150, 4)), _randn(rng, (1, 1, 150, 4))
    n_keys = np.array([1, WORKGROUP + 1, 150])
    out = tiled_attention_reference(q, k, v, 0.5, n_keys)
    for s, n in enumerate(n_keys):
        want = _plain_sdpa(q[:, :, s:s + 1], k[:, :, :n], v[:, :, :n], None, 0.5)
        assert_close(out[:, :, s:s + 1], want.astype(F32), rel=2e-6, what=f"row {s}")


@pytest.mark.parametrize("qs,ks,ms,mask_dtype,match", [
    ((1, 4, 3, 8), (1, 3, 5, 8), None, F32, "not a multiple"),
    ((1, 2, 3, 8), (1, 2, 5, 4), None, F32, r"must both be \[1, Hkv, Skv, 8\]"),
    ((2, 3, 8), (1, 2, 5, 8), None, F32, "must both be"),
    ((1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 3, 4), F32, "does not broadcast"),
    ((1, 2, 3, 8), (1, 2, 5, 8), (3, 5), np.bool_, "float32"),
    ((1, 1, 2, 4000), (1, 1, 2, 4000), None, F32, "workgroup memory"),
])
def test_sdpa_unsupported(qs, ks, ms, mask_dtype, match):
    mask = None if ms is None else np.zeros(ms, mask_dtype)
    g, _ = _sdpa_graph(qs, ks, mask, mask_input=True, mask_dtype=mask_dtype)
    with pytest.raises(UnsupportedOpError, match=match):
        lower(g)


# -- apply_rotary_emb_interleaved -----------------------------------------------------------

def _rope_graph(xs, fs):
    b = GraphBuilder()
    x, f, o = b.tensor(F32, xs), b.tensor(F32, fs), b.tensor(F32, xs)
    b.op(ROPE, x, f, o)
    return b.build([x, f], [o])


@pytest.mark.parametrize("xs,fs", [
    ((1, 5, 4), (5, 4)), ((2, 3, 8), (3, 8)), ((3, 7, 2), (1, 7, 1, 2)),
    ((2, 2, 9, 6), (9, 6)), ((1, 1, 130), (65, 2)), ((700, 3, 2), (6,)),
])
def test_rope_interleaved(gpu, rng, xs, fs):
    g, blob = _rope_graph(xs, fs)
    x = _randn(rng, xs)
    angle = rng.uniform(-math.pi, math.pi, xs[-2] * xs[-1] // 2)
    freqs = np.stack([np.cos(angle), np.sin(angle)], -1).astype(F32).reshape(fs)
    (out,), (ref,) = run_graph_both(g, blob, [x, freqs])
    # independent: multiply complex numbers (re, im) by (cos, sin) in float64
    z = x.astype(np.float64).reshape(*xs[:-1], xs[-1] // 2, 2) @ np.array([1, 1j])
    w = freqs.astype(np.float64).reshape(xs[-2], xs[-1] // 2, 2) @ np.array([1, 1j])
    plain = np.stack([(z * w).real, (z * w).imag], -1).reshape(xs)
    assert_close(ref, plain.astype(F32), rel=1e-6, atol=1e-6, what="reference vs complex")
    assert_close(out, ref, rel=1e-6, atol=1e-6, what=f"rope {xs}")


@pytest.mark.parametrize("xs,fs,match", [
    ((1, 4, 5), (4, 5), "even C"),
    ((1, 4, 8), (4, 6), "N\\*C = 32"),
    ((8,), (8,), "even C"),
])
def test_rope_interleaved_unsupported(xs, fs, match):
    with pytest.raises(UnsupportedOpError, match=match):
        lower(_rope_graph(xs, fs)[0])
