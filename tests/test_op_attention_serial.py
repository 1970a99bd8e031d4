"""The serial attention kernel (planner hint `attention:serial`, CPU adapters): one invocation
per query row, no workgroup memory. It follows tiled_attention_reference(serial=True) (the
tiled kernel's arithmetic, each tile's sum of exp in key order), and agrees with the tiled
kernel to rounding."""

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
    WORKGROUP,
    attention_variant,
    split_attention_reference,
    tiled_attention_reference,
)
from webpte.native import Executor
from webpte.plan import lower

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


@pytest.mark.parametrize("hq,hkv,d,ctx,start,chunk", [
    (6, 2, 16, 300, 250, 0),      # the window's keys span four tiles
    (9, 3, 64, 200, 3, 0),        # SmolLM2's heads, early decode: one partial tile
    (5, 1, 37, 200, 130, 64),     # split: the later splits are empty
    (4, 4, 130, 129, 125, 64),    # D = 130; the last split holds one key
])
def test_serial_cache_attention(gpu, rng, hq, hkv, d, ctx, start, chunk):
    s = 4
    g, blob, _, _ = _cache_graph(s, hq, hkv, d, ctx, prefill=start)
    xs = _sdpa_inputs(rng, 0, start, hq, hkv, d) + _sdpa_inputs(rng, start, s, hq, hkv, d)
    features = {SERIAL} | ({KV_CHUNK_HINT + str(chunk)} if chunk else set())
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
    for a, b in zip(native, tiled):
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
