"""Decoder ops: rms_norm, apply_rotary_emb_hf, sdpa_with_kv_cache (persistent KV caches),
select_as_symint (run-time positions). Graphs take input_pos as an int64 input like the
real decoder, so positions are never baked into the plan."""

import math

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import InputError, UnsupportedOpError
from webpte.kernels.attention.sdpa import attention_reference
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

F32 = np.float32
SDPA = "sdpa_with_kv_cache.default"
ROPE = "et_vk.apply_rotary_emb_hf.default"
SELECT = "et_vk.select_as_symint.default"


def _randn(rng, shape):
    return rng.standard_normal(shape).astype(F32)


def _position(b, pos, index):
    """A SymInt read per call from the int tensor `pos` (as the decoder does)."""
    s = b.symint()
    b.op(SELECT, pos, b.scalar(0), b.scalar(index), s)
    return s


def _sdpa(b, q, k, v, kc, vc, start, causal=True, scale=None, dropout=0, mask=None):
    out = b.tensor(F32, b.values[q].dims)
    b.op(SDPA, q, k, v, kc, vc, start, b.scalar(1), mask if mask is not None else b.scalar(None),
         b.scalar(dropout), b.scalar(causal), b.scalar(scale), out)
    return out


# -- rms_norm -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 4, 37), (3, 960), (1, 1, 37), (1, 4, 960), (300, 37)])
def test_rms_norm(gpu, rng, shape):
    b = GraphBuilder()
    x = b.tensor(F32, shape)
    wv = _randn(rng, shape[-1:])
    w = b.constant(wv)
    o = b.tensor(F32, shape)
    b.op("et_vk.rms_norm.default", x, w, b.scalar(1e-5), o)
    g, blob = b.build([x], [o])
    xv = _randn(rng, shape) * F32(3)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    x64 = xv.astype(np.float64)
    plain = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * wv
    assert_close(ref, plain.astype(F32), rel=1e-6, what="reference vs plain numpy")
    assert_close(out, ref, rel=1e-5, what=f"rms_norm {shape}")
    # norm:redundant (CPU adapters): 8 partial sums, each invocation forming them all.
    plan = lower(g, features={"norm:redundant"})
    assert "workgroupBarrier" not in plan.kernels[0].wgsl
    ex = Executor(plan, blob)
    ex.poison()
    assert_close(ex.run([xv])[0], ref, rel=1e-5, what=f"rms_norm {shape}, norm:redundant")


# -- RoPE -----------------------------------------------------------------------------------

def _rope_graph(s, hq, hk, d, ctx, rot, rng):
    b = GraphBuilder()
    pos = b.tensor(np.int64, (1,))
    xq, xk = b.tensor(F32, (1, s, hq, d)), b.tensor(F32, (1, s, hk, d))
    angles = np.arange(ctx)[:, None] * rng.uniform(0.01, 1.0, rot // 2)[None, :]
    angles = np.concatenate([angles, angles], axis=1)  # HF tables repeat the half
    cos, sin = np.cos(angles).astype(F32), np.sin(angles).astype(F32)
    qo, ko = b.tensor(F32, (1, s, hq, d)), b.tensor(F32, (1, s, hk, d))
    b.op(ROPE, xq, xk, b.constant(cos), b.constant(sin), _position(b, pos, -1),
         b.value_list([qo, ko]))
    g, blob = b.build([pos, xq, xk], [qo, ko])
    return g, blob, cos, sin


def _plain_rope(x, cos, sin, start):
    """Rotation of each (d, d + R/2) pair, element by element (independent of the module)."""
    out = x.astype(np.float64).copy()
    half = cos.shape[1] // 2
    for s in range(x.shape[1]):
        p = start + s
        for j in range(half):
            a, b = x[0, s, :, j].astype(np.float64), x[0, s, :, j + half].astype(np.float64)
            out[0, s, :, j] = a * cos[p, j] - b * sin[p, j]
            out[0, s, :, j + half] = b * cos[p, j + half] + a * sin[p, j + half]
    return out


@pytest.mark.parametrize("s,hq,hk,d,rot,start", [
    (4, 5, 5, 16, 16, 0), (4, 15, 5, 64, 64, 13), (4, 5, 1, 64, 64, 29),
    (1, 3, 1, 16, 16, 32), (4, 4, 2, 64, 48, 7),    # size-1 S; partial rotation
])
def test_rope(gpu, rng, s, hq, hk, d, rot, start):
    g, blob, cos, sin = _rope_graph(s, hq, hk, d, 33, rot, rng)
    xq, xk = _randn(rng, (1, s, hq, d)), _randn(rng, (1, s, hk, d))
    (q, k), (rq, rk) = run_graph_both(g, blob, [np.array([start]), xq, xk])
    for x, r in ((xq, rq), (xk, rk)):
        assert_close(r, _plain_rope(x, cos, sin, start).astype(F32), rel=1e-6,
                     what="reference vs plain numpy")
    assert_close(q, rq, rel=1e-5, what="q")
    assert_close(k, rk, rel=1e-5, what="k")


# -- SDPA -----------------------------------------------------------------------------------

def _sdpa_graph(s, hq, hkv, d, ctx, prefill=0, **kw):
    """input_pos + q/k/v -> out; with `prefill` rows, a first sdpa on the same caches fills
    rows [0, prefill) from its own inputs (pos0, q0, k0, v0) before the window."""
    b = GraphBuilder()
    kc = b.constant(np.zeros((1, ctx, hkv, d), F32))
    vc = b.constant(np.zeros((1, ctx, hkv, d), F32))
    inputs, outputs = [], []
    for rows in ([prefill] if prefill else []) + [s]:
        pos = b.tensor(np.int64, (1,))
        q, k, v = (b.tensor(F32, (1, rows, h, d)) for h in (hq, hkv, hkv))
        inputs += [pos, q, k, v]
        outputs.append(_sdpa(b, q, k, v, kc, vc, _position(b, pos, 0), **kw))
    g, blob = b.build(inputs, outputs)
    return g, blob, kc, vc


def _sdpa_inputs(rng, start, rows, hq, hkv, d):
    return [np.array([start], np.int64), _randn(rng, (1, rows, hq, d)),
            _randn(rng, (1, rows, hkv, d)), _randn(rng, (1, rows, hkv, d))]


@pytest.mark.parametrize("hq,hkv,d,ctx,start", [
    (5, 5, 16, 33, 0), (15, 5, 64, 33, 17), (5, 1, 16, 33, 29), (5, 1, 64, 33, 29),
    (15, 5, 64, 512, 0), (5, 1, 64, 512, 251), (15, 5, 64, 512, 508), (5, 5, 16, 512, 508),
])
def test_sdpa(gpu, rng, hq, hkv, d, ctx, start):
    s = 4
    g, blob, _, _ = _sdpa_graph(s, hq, hkv, d, ctx, prefill=start)
    xs = (_sdpa_inputs(rng, 0, start, hq, hkv, d) if start else []) + \
        _sdpa_inputs(rng, start, s, hq, hkv, d)
    native, ref = run_graph_both(g, blob, xs)
    for i, (a, r) in enumerate(zip(native, ref, strict=True)):
        assert_close(a, r, rel=1e-5, what=f"sdpa output {i} (Hq={hq}, Hkv={hkv}, D={d}, "
                                          f"ctx={ctx}, start={start})")


@pytest.mark.parametrize("causal,scale,dropout", [(False, None, 0.0), (True, 0.3, 0)])
def test_sdpa_forms(gpu, rng, causal, scale, dropout):
    g, blob, _, _ = _sdpa_graph(4, 6, 2, 16, 33, prefill=9, causal=causal, scale=scale,
                                dropout=dropout)
    xs = _sdpa_inputs(rng, 0, 9, 6, 2, 16) + _sdpa_inputs(rng, 9, 4, 6, 2, 16)
    native, ref = run_graph_both(g, blob, xs)
    for a, r in zip(native, ref, strict=True):
        assert_close(a, r, rel=1e-5)


def _plain_attention(steps, hq, hkv, d, ctx, causal=True, scale=None):
    """Loop-by-loop attention over a cache grown by `steps` [(start, q, k, v)]."""
    kc, vc = np.zeros((ctx, hkv, d)), np.zeros((ctx, hkv, d))
    scale = 1 / math.sqrt(d) if scale is None else scale
    outs = []
    for start, q, k, v in steps:
        s = q.shape[1]
        kc[start:start + s], vc[start:start + s] = k[0], v[0]
        out = np.zeros((1, s, hq, d))
        for i in range(s):
            for h in range(hq):
                kvh = h * hkv // hq
                cols = [c for c in range(start + s) if not (causal and c > start + i)]
                sc = np.array([q[0, i, h] @ kc[c, kvh] * scale for c in cols])
                w = np.exp(sc - sc.max())
                out[0, i, h] = sum(wj * vc[c, kvh] for wj, c in zip(w / w.sum(), cols, strict=True))
        outs.append(out)
    return outs, kc, vc


@pytest.mark.parametrize("hq,hkv,causal", [(6, 2, True), (5, 1, False), (3, 3, True)])
def test_sdpa_reference_matches_plain_attention(rng, hq, hkv, causal):
    d, ctx = 8, 13
    g, blob, kc, vc = _sdpa_graph(3, hq, hkv, d, ctx, causal=causal)
    state: dict = {}
    steps = []
    for start in (0, 3, 5, 10):
        xs = _sdpa_inputs(rng, start, 3, hq, hkv, d)
        env = run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob, state)
        steps.append((start, *xs[1:]))
        outs, pk, pv = _plain_attention(steps, hq, hkv, d, ctx, causal)
        assert_close(env.get(g.output_ids[0]), outs[-1].astype(F32), rel=1e-6)
    assert_close(state[kc][0], pk.astype(F32), exact=True)
    assert_close(state[vc][0], pv.astype(F32), exact=True)
    assert_close(attention_reference(steps[-1][1], state[kc], state[vc], 10, 0.25, causal),
                 _plain_attention(steps, hq, hkv, d, ctx, causal, 0.25)[0][-1].astype(F32),
                 rel=1e-6, what="explicit scale")


# -- decoder-like layer over several calls on one Executor ---------------------------------

def _layer_graph(s, hq, hkv, d, ctx, rng):
    """pos -> RoPE (index -1) -> sdpa (index 0), like one attention block of the decoder."""
    b = GraphBuilder()
    pos = b.tensor(np.int64, (1,))
    q, k, v = (b.tensor(F32, (1, s, h, d)) for h in (hq, hkv, hkv))
    angles = np.arange(ctx)[:, None] * (1e4 ** (-np.arange(d // 2) / (d // 2)))[None, :]
    angles = np.concatenate([angles, angles], axis=1)
    qr, kr = b.tensor(F32, (1, s, hq, d)), b.tensor(F32, (1, s, hkv, d))
    b.op(ROPE, q, k, b.constant(np.cos(angles).astype(F32)),
         b.constant(np.sin(angles).astype(F32)), _position(b, pos, -1), b.value_list([qr, kr]))
    caches = [b.constant(np.zeros((1, ctx, hkv, d), F32)) for _ in range(2)]
    out = _sdpa(b, qr, kr, v, *caches, _position(b, pos, 0))
    g, blob = b.build([pos, q, k, v], [out, qr])
    return g, blob, caches


# The serial kernel (CPU adapters) stores the window's rows in the cache itself.
ATTENTION_VARIANTS = [pytest.param((), id="tiled"),
                      pytest.param(("attention:serial",), id="serial")]


@pytest.mark.parametrize("features", ATTENTION_VARIANTS)
@pytest.mark.parametrize("hq,hkv,d,ctx,starts", [
    (15, 5, 64, 33, (0, 4, 8, 6, 9, 10, 20, 29)),   # overlapping windows rewrite rows
    (5, 1, 16, 512, (0, 4, 100, 300, 508)),
])
def test_state_persists_across_calls(gpu, rng, hq, hkv, d, ctx, starts, features):
    s = 4
    g, blob, caches = _layer_graph(s, hq, hkv, d, ctx, rng)
    plan = lower(g, features=features)
    writes = sum("sdpa_cache_write" in k.name for k in plan.kernels)
    assert writes == (0 if features else 1)
    ex = Executor(plan, blob)
    ex.poison()
    state: dict = {}
    for start in starts:
        xs = _sdpa_inputs(rng, start, s, hq, hkv, d)
        native = ex.run(xs)
        env = run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob, state)
        for a, vid in zip(native, g.output_ids, strict=True):
            assert_close(a, env.get(vid), rel=1e-5, what=f"call at start {start}")
    assert sorted(v for i in plan.state for v in plan.buffers[i].values) == sorted(caches)
    for i in plan.state:
        (vid,) = plan.buffers[i].values
        got = np.frombuffer(ex.read_buffer(i), F32).reshape(state[vid].shape)
        assert_close(got, state[vid], exact=True, what=f"cache {vid}")
    ex.reset()
    for i in plan.state:
        assert not any(ex.read_buffer(i))


def test_select_as_symint_reads_per_call(gpu):
    b = GraphBuilder()
    x = b.tensor(np.int64, (5,))
    last, mid = _position(b, x, -1), _position(b, x, 2)
    g, blob = b.build([x], [])
    plan = lower(g)
    ex = Executor(plan, blob)
    bufs = {v: i for i, spec in enumerate(plan.buffers) for v in spec.values}
    for xv in ([3, 1, 4, 1, 5], [-7, 0, 123456, 8, 2**31 - 1]):
        xv = np.array(xv, np.int64)
        ex.run([xv])
        env = run_reference(g, {x: xv}, blob)
        for vid, want in ((last, xv[-1]), (mid, xv[2])):
            assert env.scalar(vid) == want
            assert np.frombuffer(ex.read_buffer(bufs[vid]), np.int32)[0] == want


@pytest.mark.parametrize("features", ATTENTION_VARIANTS)
def test_positions_outside_the_cache_stay_in_bounds(gpu, rng, features):
    """A bad input_pos cannot read or write out of bounds on the GPU; the reference refuses."""
    ctx, hq, hkv, d = 33, 5, 1, 16
    g, blob, (kc, _) = _layer_graph(4, hq, hkv, d, ctx, rng)
    plan = lower(g, features=features)
    ex = Executor(plan, blob)
    kbuf = next(i for i in plan.state if plan.buffers[i].values == [kc])
    for start in (31, -3, 1000):
        xs = _sdpa_inputs(rng, start, 4, hq, hkv, d)
        out, qr = ex.run(xs)
        assert np.isfinite(out).all() and np.isfinite(qr).all()
        with pytest.raises(InputError, match="outside"):
            run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob)
    cache = np.frombuffer(ex.read_buffer(kbuf), F32).reshape(ctx, hkv, d)
    assert np.isfinite(cache).all() and cache[31:].any()  # rows 31, 32 of the start-31 call


# -- unsupported forms ----------------------------------------------------------------------

def _build_sdpa_variant(hq=4, hkv=2, d=8, with_mask=False, **kw):
    b = GraphBuilder()
    pos = b.tensor(np.int32, (1,))
    q, k, v = (b.tensor(F32, (1, 4, h, d)) for h in (hq, hkv, hkv))
    kc, vc = (b.constant(np.zeros((1, 16, hkv, d), F32)) for _ in range(2))
    if with_mask:
        kw["mask"] = b.tensor(F32, (4, 16))
    out = _sdpa(b, q, k, v, kc, vc, _position(b, pos, 0), **kw)
    return b.build([pos, q, k, v], [out])[0]


@pytest.mark.parametrize("kw,match", [
    ({"dropout": 0.5}, "dropout"),
    ({"hq": 5, "hkv": 2}, "not a multiple"),
    ({"with_mask": True}, "attn_mask"),
    ({"d": 5000}, "workgroup memory"),
])
def test_sdpa_unsupported(kw, match):
    with pytest.raises(UnsupportedOpError, match=match):
        lower(_build_sdpa_variant(**kw))


def test_other_unsupported_forms():
    b = GraphBuilder()
    x, o = b.tensor(F32, (2, 7)), b.tensor(F32, (2, 7))
    b.op("et_vk.rms_norm.default", x, b.constant(np.ones(6, F32)), b.scalar(1e-6), o)
    with pytest.raises(UnsupportedOpError, match="weight must be"):
        lower(b.build([x], [o])[0])
    b = GraphBuilder()
    xq, xk = b.tensor(F32, (1, 2, 2, 8)), b.tensor(F32, (1, 2, 1, 8))
    pos = b.tensor(np.int32, (1,))
    odd = b.constant(np.ones((4, 5), F32))
    b.op(ROPE, xq, xk, odd, odd, _position(b, pos, 0),
         b.value_list([b.tensor(F32, (1, 2, 2, 8)), b.tensor(F32, (1, 2, 1, 8))]))
    with pytest.raises(UnsupportedOpError, match="rotary dim 5"):
        lower(b.build([pos, xq, xk], [])[0])
    b = GraphBuilder()
    xf = b.tensor(F32, (1,))
    _position(b, xf, 0)
    with pytest.raises(UnsupportedOpError, match="FLOAT32"):
        lower(b.build([xf], [])[0])


# -- sdpa_with_kv_cache on the shared tiled kernel: odd head dims, rows over several tiles ---

@pytest.mark.parametrize("s,hq,hkv,d,ctx,start,causal", [
    (5, 6, 2, 37, 150, 70, True),     # D not a multiple of 4; the window's keys span 3 tiles
    (3, 4, 1, 130, 71, 64, True),     # D over two invocations; a row's last tile has 3 keys
    (1, 3, 3, 5, 200, 131, False),    # decode step, non-causal form
])
def test_sdpa_odd_head_dims_and_tiles(gpu, rng, s, hq, hkv, d, ctx, start, causal):
    g, blob, _, _ = _sdpa_graph(s, hq, hkv, d, ctx, prefill=start, causal=causal)
    steps = [(0, *_sdpa_inputs(rng, 0, start, hq, hkv, d)[1:]),
             (start, *_sdpa_inputs(rng, start, s, hq, hkv, d)[1:])]
    xs = [np.array([0])] + list(steps[0][1:]) + [np.array([start])] + list(steps[1][1:])
    native, ref = run_graph_both(g, blob, xs)
    plain = _plain_attention(steps, hq, hkv, d, ctx, causal)[0]
    for i, (a, r, p) in enumerate(zip(native, ref, plain, strict=True)):
        assert_close(r, p.astype(F32), rel=2e-6, what=f"reference vs plain attention, out {i}")
        assert_close(a, r, rel=1e-5, what=f"sdpa output {i} (D={d}, ctx={ctx})")
