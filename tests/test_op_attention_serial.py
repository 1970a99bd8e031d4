"""The serial attention kernel (planner hint `attention:serial`, CPU adapters): one invocation
per query row, no workgroup memory. It follows tiled_attention_reference(serial=True) (the
tiled kernel's arithmetic, each tile's sum of exp in key order), and agrees with the tiled
kernel to rounding. llvmpipe ends an invocation's loops past LOOP_BUDGET iterations in all, so
rows of many keys are split (the catalog's selfattn_siglip, 576 keys of D 64, was wrong)."""

from __future__ import annotations

import numpy as np
import pytest

from harness import assert_close
from test_op_attention import _randn, _sdpa_graph
from test_op_decoder import _sdpa_graph as _cache_graph
from test_op_decoder import _sdpa_inputs
from webpte.errors import PlanError
from webpte.kernels.attention._tiled import (
    ATTENTION_HINT,
    KV_CHUNK_HINT,
    LOOP_BUDGET,
    WORKGROUP,
    attention_variant,
    serial_chunk,
    serial_loop_iterations,
    serial_max_keys,
    split_attention_reference,
    tiled_attention_reference,
)
from webpte.native import Executor
from webpte.planner import lower

SERIAL = ATTENTION_HINT + "serial"


def _run(graph, blob, xs, features):
    plan = lower(graph, features=features)
    ex = Executor(plan, blob)
    ex.poison()
    return plan, ex.run(xs)


def test_the_hint_names_a_variant():
    assert attention_variant(()) == "tiled"
    assert attention_variant({SERIAL}) == "serial"
    with pytest.raises(PlanError, match="not one of tiled, serial"):
        attention_variant({ATTENTION_HINT + "fast"})


def test_a_serial_invocation_stays_within_the_loop_budget():
    assert serial_max_keys(64) == 448 and serial_max_keys(16) == 1792
    assert serial_loop_iterations(64, 448) <= LOOP_BUDGET < serial_loop_iterations(64, 512)
    assert serial_chunk(64, 576, 0) == 320       # selfattn_siglip: two splits, 320 + 256 keys
    assert serial_chunk(64, 2048, 0) == 448      # a 2k cache: five splits
    assert serial_chunk(64, 2048, 256) == 256    # a hinted chunk within the budget is kept
    assert serial_chunk(64, 448, 0) == 0 and serial_chunk(16, 576, 0) == 0
    for d in (5, 64, 130, 491):
        for n in (1, 63, 448, 576, 2048, 70000):
            chunk = serial_chunk(d, n, 0)
            assert serial_loop_iterations(d, chunk or n) <= LOOP_BUDGET, (d, n)
            assert chunk % WORKGROUP == 0
    assert serial_loop_iterations(491, WORKGROUP) <= LOOP_BUDGET
    assert attention_variant({SERIAL}, 491) == "serial"
    assert attention_variant({SERIAL}, 492) == "tiled"   # one tile alone passes the budget


@pytest.mark.parametrize("hq,hkv,d,ctx,start,chunk", [
    (6, 2, 16, 300, 250, 0),      # the window's keys span four tiles
    (9, 3, 64, 200, 3, 0),        # SmolLM2's heads, early decode: one partial tile
    (5, 1, 37, 200, 130, 64),     # split: the later splits are empty
    (4, 4, 130, 129, 125, 64),    # D = 130; the last split holds one key
    (9, 3, 64, 700, 600, 0),      # past 448 keys of D 64: split under the loop budget
])
def test_serial_cache_attention(gpu, rng, hq, hkv, d, ctx, start, chunk):
    s = 4
    g, blob, _, _ = _cache_graph(s, hq, hkv, d, ctx, prefill=start)
    xs = _sdpa_inputs(rng, 0, start, hq, hkv, d) + _sdpa_inputs(rng, start, s, hq, hkv, d)
    features = {SERIAL} | ({KV_CHUNK_HINT + str(chunk)} if chunk else set())
    chunk = serial_chunk(d, ctx, chunk)
    plan, native = _run(g, blob, xs, features)
    names = {k.name.rsplit("_", 1)[0] for k in plan.kernels}
    assert "sdpa_serial" in names and "sdpa_attention" not in names
    assert ("sdpa_combine" in names) == bool(chunk)
    _, tiled = _run(g, blob, xs, set())
    q, k, v = (x[0].transpose(1, 0, 2)[None] for x in xs[5:8])
    kc = np.concatenate([xs[2][0], xs[6][0]]).transpose(1, 0, 2)[None]
    vc = np.concatenate([xs[3][0], xs[7][0]]).transpose(1, 0, 2)[None]
    n_keys = start + np.arange(s) + 1
    if chunk:
        ref = split_attention_reference(q, kc, vc, 1 / np.sqrt(d), n_keys, chunk, serial=True)
    else:
        ref = tiled_attention_reference(q, kc, vc, 1 / np.sqrt(d), n_keys, serial=True)
    assert_close(native[1], ref.transpose(0, 2, 1, 3), rel=1e-6, what="serial kernel")
    # The prefill call (start rows) and the window both agree with the tiled kernel.
    for a, b in zip(native, tiled, strict=True):
        assert_close(a, b, rel=1e-5, what="serial vs tiled")


def test_serial_fixed_keys_with_a_mask_and_gqa(gpu, rng):
    qs, ks = (2, 6, 13, 24), (2, 2, 2 * WORKGROUP + 7, 24)
    mask = np.clip(_randn(rng, (2, 6, 13, ks[2]), 2.0), -3.0, 0.0)
    g, blob = _sdpa_graph(qs, ks, mask, 0.2)
    xs = [_randn(rng, qs), _randn(rng, ks), _randn(rng, ks)]
    _, (out,) = _run(g, blob, xs, {SERIAL})
    ref = tiled_attention_reference(*xs, np.float32(0.2), np.full(13, ks[2]), mask, serial=True)
    tree = tiled_attention_reference(*xs, np.float32(0.2), np.full(13, ks[2]), mask)
    assert_close(out, ref, rel=1e-6, what="serial sdpa with a mask")
    assert_close(ref, tree, rel=1e-6, what="serial vs tree sums")
    assert not np.array_equal(ref, tree)   # the sum order is really another one


def test_serial_rows_past_the_loop_budget(gpu, rng):
    """576 keys of D 64 (the catalog's selfattn_siglip, fewer rows): one invocation per row
    ran 75k loop iterations and llvmpipe cut every row short."""
    qs, ks = (1, 2, 37, 64), (1, 2, 576, 64)
    g, blob = _sdpa_graph(qs, ks)
    xs = [_randn(rng, qs), _randn(rng, ks), _randn(rng, ks)]
    plan, (out,) = _run(g, blob, xs, {SERIAL})
    chunk = serial_chunk(64, 576, 0)
    ref = split_attention_reference(*xs, 1 / np.sqrt(64), np.full(37, 576), chunk, serial=True)
    assert_close(out, ref, rel=1e-6, what="serial sdpa over 576 keys")
    names = [plan.kernels[d.kernel].name.rsplit("_", 1)[0] for d in plan.dispatches]
    assert names == ["sdpa_serial", "sdpa_combine"]
