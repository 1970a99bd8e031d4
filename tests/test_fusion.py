"""Elementwise fusion: fewer dispatches, bit-identical outputs, and only legal groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness import assert_close, assert_plans_bitwise
from webpte.kernels.reference import run_reference
from webpte.plan.io import sample_inputs
from webpte.planner import lower
from webpte.program import load, plan_method
from webpte.pte import read_program
from webpte.pte.builder import GraphBuilder

FIXTURES = Path(__file__).parent / "fixtures"
QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"
# Dispatches per call unfused -> fused (elementwise and dual int8 linears, test_fusion_q8.py),
# quantize included: chains ending in a quantize are one dispatch, repeated ops are computed
# once (planner/share.py), the pass-1 quantize shares the pass-2 chain's dispatch, an rms_norm
# read only by such a chain is computed in it, a dual linear runs the silu after it, and a
# layer's two attention-sink blends (k's and v's) are one dispatch.
PROGRAMS = {
    "decoder_q8_tiny.pte": (254, 29),
    "vision_q8_tiny.pte": (216, 95),
    "linear_q8.pte": (14, 7),
    "siglip_block_f32.pte": (20, 20),
    "tiny_vlm/decoder_q8.pte": (254, 29),
    "tiny_vlm/vision_q8.pte": (118, 54),
}
# Kernels (pipelines) fused: quantize in groups adds none (one fewer: the lone quantize's);
# the vision towers' tiled pairs are one dual kernel per shape instead of linear + add; the
# decoders' attention-sink blends (sub, mul, add with broadcast operands) are one kernel, and
# each rms_norm runs in its quantize chain's kernel (no rms_norm kernel of its own), and the
# MLP's silu runs in its gate linear's kernel; q, k and v are one joined kernel (two shapes
# of dual kernel fewer), gate and up one paired kernel (one fewer) that also quantizes the
# product for the down projection (its quantize kernel one fewer).
KERNELS = {"decoder_q8_tiny.pte": 18, "tiny_vlm/decoder_q8.pte": 18, "vision_q8_tiny.pte": 24,
           "tiny_vlm/vision_q8.pte": 24}


def _plan(path: Path, fuse: bool, monkeypatch):
    monkeypatch.setenv("WEBPTE_FUSE", "1" if fuse else "0")
    return plan_method(read_program(path.read_bytes()))


@pytest.mark.parametrize("name", PROGRAMS)
def test_fusion_cuts_dispatches(name, monkeypatch):
    unfused, fused = (_plan(FIXTURES / name, f, monkeypatch) for f in (False, True))
    print(f"{name}: dispatches {len(unfused.dispatches)} -> {len(fused.dispatches)}, "
          f"kernels {len(unfused.kernels)} -> {len(fused.kernels)}")
    assert (len(unfused.dispatches), len(fused.dispatches)) == PROGRAMS[name]
    assert len(fused.kernels) <= len(unfused.kernels)


def test_fused_f32_intermediates_are_opaque(monkeypatch):
    """Every f32 value a fused kernel passes from one op to the next goes through
    `opaque_f32` (an OR with a runtime zero), so no compiler can contract or reassociate
    float ops across the ops' boundaries: each op rounds as its own kernel does."""
    import re

    plan = _plan(FIXTURES / "decoder_q8_tiny.pte", True, monkeypatch)
    fused = [k.wgsl for k in plan.kernels if k.name.startswith(("fused_elementwise",
                                                                 "linear_q8_dual"))]
    steps = [line for src in fused for line in src.splitlines()
             if re.match(r"\s*let s\d+ = ", line)]
    f32_steps = [line for line in steps if "extractBits" not in line and "i32(" not in line
                 and "select(" not in line]
    assert f32_steps, "no f32 intermediate in the fused kernels"
    assert all("| p[" in line for line in f32_steps), "\n".join(f32_steps)


def _calls(path: Path, plan) -> list[list[np.ndarray]]:
    npz = path.with_suffix(".npz")
    if npz.exists():
        from webpte.cli import _calls_from_npz
        return [inputs for inputs, _ in _calls_from_npz(str(npz))]
    rng = np.random.default_rng(7)
    return [sample_inputs(plan, rng) for _ in range(2)]


@pytest.mark.parametrize("name", PROGRAMS)
def test_fused_outputs_are_bitwise_unfused(gpu, name, monkeypatch):
    path = FIXTURES / name
    monkeypatch.setenv("WEBPTE_FUSE", "0")
    unfused = load(path)
    monkeypatch.setenv("WEBPTE_FUSE", "1")
    fused = load(path)
    assert len(fused.plan.dispatches) < len(unfused.plan.dispatches) or "siglip" in name
    fused.executor.poison()
    fwd = fused.program.method("forward")
    in_ids, out_ids = fwd.input_value_ids(), fwd.output_value_ids()
    state: dict = {}
    for i, inputs in enumerate(_calls(path, fused.plan)):
        a, b = unfused.run(*inputs), fused.run(*inputs)
        env = run_reference(fwd.graph, dict(zip(in_ids, inputs, strict=True)), fused.data, state)
        for j, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), \
                f"{name} call {i} output {j}: fused differs from unfused"
            assert_close(y, env.get(out_ids[j]), rel=1e-4,
                         what=f"{name} call {i} output {j} vs numpy")


def _diamond(shared_output: bool):
    """x*2 -> relu -> (+ x*2): the product is used twice (or is also an output)."""
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 5))
    two = b.constant(np.array(2.0, np.float32))
    p, r, s = (b.tensor(np.float32, (3, 5)) for _ in range(3))
    b.op("aten.mul.Tensor", x, two, p)
    b.op("aten.relu.default", p, r)
    if shared_output:
        b.op("aten.add.Tensor", r, x, b.scalar(1), s)
        return b.build([x], [s, p])
    b.op("aten.add.Tensor", r, p, b.scalar(1), s)
    return b.build([x], [s])


@pytest.mark.parametrize("shared_output", [False, True])
def test_values_used_twice_or_returned_are_not_fused(shared_output):
    g, _ = _diamond(shared_output)
    plan = lower(g)
    ops = [d.op for d in plan.dispatches]
    # relu+add fuse (the relu value is private); the product is stored for both uses.
    assert ops == ["aten.mul.Tensor", "fused:relu+add"], ops
    assert len(lower(g, fuse=False).dispatches) == 3


def test_diamond_matches_reference(gpu):
    from harness import run_graph_both
    for shared in (False, True):
        g, blob = _diamond(shared)
        x = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
        native, ref = run_graph_both(g, blob, [x])
        for o, r in zip(native, ref, strict=True):
            assert o.tobytes() == r.astype(o.dtype).tobytes()


def test_int8_chain_is_fused_and_exact(gpu):
    """f32 -> round -> clamp -> _to_copy int8 -> _to_copy f32 -> mul: packed intermediates."""
    b = GraphBuilder()
    x = b.tensor(np.float32, (7, 9))
    r, c, f, m = (b.tensor(np.float32, (7, 9)) for _ in range(4))
    q = b.tensor(np.int8, (7, 9))
    scale = b.constant(np.array(0.37, np.float32))
    b.op("aten.round.default", x, r)
    b.op("aten.clamp.default", r, b.scalar(-200.0), b.scalar(200.0), c)
    for src, dst in ((c, q), (q, f)):
        b.op("aten._to_copy.default", src, *[b.scalar(None)] * 4, b.scalar(False),
             b.scalar(None), dst)
    b.op("aten.mul.Tensor", f, scale, m)
    g, blob = b.build([x], [m])
    assert [d.op for d in lower(g).dispatches] == ["fused:round+clamp+cast+cast+mul"]
    from harness import run_graph_both
    x_in = (np.random.default_rng(5).standard_normal((7, 9)) * 150).astype(np.float32)
    native, ref = run_graph_both(g, blob, [x_in])
    assert native[0].tobytes() == ref[0].astype(np.float32).tobytes()


@pytest.mark.parametrize("name", KERNELS)
def test_fused_quantize_adds_no_pipelines(name, monkeypatch):
    plan = _plan(FIXTURES / name, True, monkeypatch)
    assert len(plan.kernels) == KERNELS[name]
    assert any(d.op.startswith("fused:") and d.op.endswith("+quantize") for d in plan.dispatches)


def _quantize(b, x, scale, zp, qmin, qmax, out):
    b.op(QUANTIZE, x, b.scalar(scale), b.scalar(zp), b.scalar(qmin), b.scalar(qmax),
         b.scalar(None), out)


def _chain_to_quantize(shape, out_dtype, scale, zp, qmin, qmax, dequantize: bool):
    """x * 2 + y -> quantize; with `dequantize`, -> _to_copy f32 -> * 0.37 (quantize inside)."""
    b = GraphBuilder()
    x, y = b.tensor(np.float32, shape), b.tensor(np.float32, shape)
    m, a = b.tensor(np.float32, shape), b.tensor(np.float32, shape)
    q = b.tensor(out_dtype, shape)
    b.op("aten.mul.Tensor", x, b.constant(np.array(2.0, np.float32)), m)
    b.op("aten.add.Tensor", m, y, b.scalar(1), a)
    _quantize(b, a, scale, zp, qmin, qmax, q)
    if not dequantize:
        return b.build([x, y], [q])
    f, o = b.tensor(np.float32, shape), b.tensor(np.float32, shape)
    b.op("aten._to_copy.default", q, *[b.scalar(None)] * 4, b.scalar(False), b.scalar(None), f)
    b.op("aten.mul.Tensor", f, b.constant(np.array(0.37, np.float32)), o)
    return b.build([x, y], [o])


@pytest.mark.parametrize("dequantize", [False, True], ids=["root", "inside"])
@pytest.mark.parametrize("shape,out_dtype,scale,zp,qmin,qmax", [
    ((7, 11), np.int8, 0.25, 0, -128, 127),       # x*4 on .5 ties; |x| beyond the range
    ((3, 5, 13), np.int8, 0.0173, -7, -100, 90),  # a narrower range than the dtype's
    ((1,), np.int8, 0.5, 3, -128, 127),
    ((5, 9), np.uint8, 0.25, 128, 0, 255),
    ((2, 1, 19), np.uint8, 0.0371, 3, 0, 255),
])
def test_chain_ending_in_quantize_is_one_exact_dispatch(gpu, shape, out_dtype, scale, zp,
                                                        qmin, qmax, dequantize):
    from webpte.native import Executor
    g, blob = _chain_to_quantize(shape, out_dtype, scale, zp, qmin, qmax, dequantize)
    fused, unfused = lower(g), lower(g, fuse=False)
    ops = "mul+add+quantize" + ("+cast+mul" if dequantize else "")
    assert [d.op for d in fused.dispatches] == [f"fused:{ops}"]
    assert len(unfused.dispatches) == 5 if dequantize else 3
    rng = np.random.default_rng(11)
    # 2x + y on multiples of 1/8: x*inv lands on .5 ties for power-of-two scales; up to
    # |2x + y| ~ 150 goes far past every clamp bound.
    x = (rng.integers(-400, 400, shape) / 8).astype(np.float32)
    y = (rng.integers(-80, 80, shape) / 8).astype(np.float32)
    x.flat[0], y.flat[0] = 0.0625, 0.0   # exactly 0.5 * scale for scale 0.25: a tie to 0
    outs = []
    for plan in (fused, unfused):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run([x, y])[0])
    env = run_reference(g, dict(zip(g.input_ids, [x, y], strict=True)), blob)
    ref = env.get(g.output_ids[0])
    assert outs[0].dtype == outs[1].dtype and outs[0].tobytes() == outs[1].tobytes(), \
        "fused differs from unfused"
    assert_close(outs[0], ref.astype(outs[0].dtype), exact=True, what="fused vs numpy")
    if not dequantize and scale == 0.25:
        ties = (2 * x + y) * 4 % 1 == 0.5
        assert ties.sum() > 5   # the data does exercise round-half-even


def test_quantized_chains_with_different_scales_share_one_pipeline():
    b = GraphBuilder()
    xs = [b.tensor(np.float32, (3, 7)) for _ in range(4)]   # two pairs: no shared input
    outs = []
    for (x, y), (scale, zp) in zip((xs[:2], xs[2:]), ((0.05, 3), (0.25, -1)), strict=True):
        a, q = b.tensor(np.float32, (3, 7)), b.tensor(np.int8, (3, 7))
        b.op("aten.add.Tensor", x, y, b.scalar(1), a)
        _quantize(b, a, scale, zp, -128, 127, q)
        outs.append(q)
    g, _ = b.build(xs, outs)
    plan = lower(g)
    assert [d.op for d in plan.dispatches] == ["fused:add+quantize"] * 2
    assert len(plan.kernels) == 1
    words = [plan.buffers[d.bindings[-2]].init["words"] for d in plan.dispatches]
    assert words[0] != words[1] and [w[1] for w in words] == [3, 0xFFFFFFFF]


def _math_chains():
    """Three chains of the newer elementwise ops, each one dispatch when fused:
    tanh -> hardswish -> pow 2.5 (runtime NaN/inf words) -> gt 0.05 -> where(., y, z);
    int floor division -> abs -> eq 3 -> logical_not -> where(., y, z);
    full_like 2.5 -> mul x -> exp -> tanh."""
    shape = (7, 13)
    b = GraphBuilder()
    x, y, z = (b.tensor(np.float32, shape) for _ in range(3))
    i, j = b.tensor(np.int32, shape), b.tensor(np.int32, shape)
    f = [b.tensor(np.float32, shape) for _ in range(9)]
    k = [b.tensor(np.int32, shape) for _ in range(2)]
    c = [b.tensor(np.bool_, shape) for _ in range(3)]
    b.op("aten.tanh.default", x, f[0])
    b.op("aten.hardswish.default", f[0], f[1])
    b.op("aten.pow.Tensor_Scalar", f[1], b.scalar(2.5), f[2])
    b.op("aten.gt.Scalar", f[2], b.scalar(0.05), c[0])
    b.op("aten.where.self", c[0], y, z, f[3])
    b.op("aten.div.Tensor_mode", i, j, b.scalar("floor"), k[0])
    b.op("aten.abs.default", k[0], k[1])
    b.op("aten.eq.Scalar", k[1], b.scalar(3), c[1])
    b.op("aten.logical_not.default", c[1], c[2])
    b.op("aten.where.self", c[2], y, z, f[4])
    b.op("aten.full_like.default", x, b.scalar(2.5), *[b.scalar(None)] * 5, f[5])
    b.op("aten.mul.Tensor", f[5], x, f[6])
    b.op("aten.exp.default", f[6], f[7])
    b.op("aten.tanh.default", f[7], f[8])
    return b.build([x, y, z, i, j], [f[3], f[4], f[8]])


def test_new_elementwise_ops_fuse_bitwise_unfused(gpu):
    g, blob = _math_chains()
    fused, unfused = lower(g), lower(g, fuse=False)
    # The second chain reads y and z, which the first reads too, and i and j, method inputs:
    # one dispatch, two outputs. The third (it reads only x) would take a ninth binding.
    assert [d.op for d in fused.dispatches] == [
        "fused:tanh+hardswish+pow_scalar+gt+where+div_floor+abs+eq+logical_not+where",
        "fused:fill+mul+exp+tanh"]
    assert len(unfused.dispatches) == 14
    rng = np.random.default_rng(13)
    shape = (7, 13)
    xs = [rng.uniform(-4, 4, shape).astype(np.float32) for _ in range(3)]
    xs += [rng.integers(-50, 50, shape).astype(np.int32),
           rng.choice([-7, -3, -2, 2, 3, 5], shape).astype(np.int32)]
    assert_plans_bitwise(g, blob, xs, {"fused": fused, "unfused": unfused}, rel=1e-5)


def test_broadcast_index_reads_numpy_broadcast():
    from webpte.planner.fusion import broadcast_index
    for dims, to in (((1, 4, 1, 1), (1, 4, 3, 64)), ((1, 1, 3, 64), (1, 4, 3, 64)),
                     ((5, 1), (2, 5, 7)), ((7,), (2, 5, 7)), ((1,), (3, 2))):
        expr = broadcast_index(dims, to)
        src = np.arange(int(np.prod(dims))).reshape(dims)
        want = np.broadcast_to(src, to).reshape(-1)
        got = [eval(expr.replace("u", "").replace("/", "//"), {"i": i})
               for i in range(int(np.prod(to)))]
        assert got == list(want), (dims, to, expr)


def _sink_blend():
    """The decoder's attention-sink blend: k + w * (c - k) with per-row weights w [1,4,1,1]
    and a constant row c [1,1,3,8] broadcast over k [1,4,3,8], for k and v."""
    b = GraphBuilder()
    k, v = (b.tensor(np.float32, (1, 4, 3, 8)) for _ in range(2))
    w = b.tensor(np.float32, (1, 4, 1, 1))
    rng = np.random.default_rng(11)
    outs = []
    for x in (k, v):
        c = b.constant(rng.standard_normal((1, 1, 3, 8)).astype(np.float32))
        d, m, o = (b.tensor(np.float32, (1, 4, 3, 8)) for _ in range(3))
        b.op("aten.sub.Tensor", c, x, b.scalar(1), d)
        b.op("aten.mul.Tensor", w, d, m)
        b.op("aten.add.Tensor", x, m, b.scalar(1), o)
        outs.append(o)
    return b.build([k, v, w], outs)


def test_broadcast_operands_fuse_bitwise(gpu):
    from harness import run_graph_both
    g, blob = _sink_blend()
    # Both blends read w; v is an input, ready where k's blend runs: one dispatch.
    assert [d.op for d in lower(g).dispatches] == ["fused:sub+mul+add+sub+mul+add"]
    assert len(lower(g, fuse=False).dispatches) == 6
    rng = np.random.default_rng(12)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((1, 4, 3, 8), (1, 4, 3, 8), (1, 4, 1, 1))]
    native, ref = run_graph_both(g, blob, arrays)
    for o, r in zip(native, ref, strict=True):
        assert o.tobytes() == r.astype(np.float32).tobytes()


def _norm_chain(shared: bool):
    """rms_norm -> mul by a constant -> add x; with `shared` the normed tensor is an output."""
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 40))
    w = b.constant(np.random.default_rng(13).standard_normal(40).astype(np.float32))
    half = b.constant(np.array(0.37, np.float32))
    n, m, o = (b.tensor(np.float32, (3, 40)) for _ in range(3))
    b.op("et_vk.rms_norm.default", x, w, b.scalar(1e-6), n)
    b.op("aten.mul.Tensor", n, half, m)
    b.op("aten.sub.Tensor", x, m, b.scalar(1), o)
    return b.build([x], [o, n] if shared else [o])


@pytest.mark.parametrize("features", [(), ("norm:redundant",)])
@pytest.mark.parametrize("shared", [False, True])
def test_rms_norm_runs_in_its_chain_bitwise(gpu, shared, features):
    """Also with `norm:redundant` (CPU adapters: every invocation forms the row's sum itself),
    where the unfused rms_norm takes the same form."""
    from webpte.native import Executor
    g, blob = _norm_chain(shared)
    fused, unfused = lower(g, features=features), lower(g, features=features, fuse=False)
    assert ("var<workgroup> partial" in fused.kernels[0].wgsl) == (not features)
    ops = [d.op for d in fused.dispatches]
    want = (["et_vk.rms_norm.default", "fused:mul+sub"] if shared
            else ["fused:rms_norm+mul+sub"])
    assert ops == want, ops
    x = (np.random.default_rng(14).standard_normal((3, 40)) * 3).astype(np.float32)
    outs = []
    for plan in (fused, unfused):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run([x]))
    for a, b in zip(*outs, strict=True):
        assert a.tobytes() == b.tobytes()
