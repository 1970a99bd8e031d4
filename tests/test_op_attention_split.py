"""Flash-decoding: attention split over the keys (planner hint `attn_kv_chunk:N`), then merged.
The split kernels follow split_attention_reference's f32 arithmetic; against the unsplit
kernel's reference they differ only by the merge's rounding."""

from __future__ import annotations

import numpy as np
import pytest

from harness import assert_close
from test_op_attention import _randn, _sdpa_graph
from test_op_decoder import _sdpa_graph as _cache_graph
from test_op_decoder import _sdpa_inputs
from webpte.kernels.attention._tiled import (
    KV_CHUNK_HINT,
    WORKGROUP,
    kv_chunk,
    split_attention_reference,
    tiled_attention_reference,
)
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower

F32 = np.float32


def _run(graph, blob, xs, chunk):
    plan = lower(graph, features={KV_CHUNK_HINT + str(chunk)})
    ex = Executor(plan, blob)
    ex.poison()
    return plan, ex.run(xs)


def test_the_hint_picks_whole_tiles_and_at_most_64_splits():
    assert kv_chunk((), 4096) == 0
    assert kv_chunk({KV_CHUNK_HINT + "100"}, 4096) == 2 * WORKGROUP
    assert kv_chunk({KV_CHUNK_HINT + "64"}, 64) == 0            # one chunk: no split
    assert kv_chunk({KV_CHUNK_HINT + "64"}, 65536) == 1024      # 64 splits at most
    assert kv_chunk({KV_CHUNK_HINT + "x"}, 4096) == 0


@pytest.mark.parametrize("hq,hkv,d,ctx,start,chunk", [
    (6, 2, 16, 300, 250, 64),     # 5 splits; the window's rows end inside the 4th
    (5, 1, 37, 200, 3, 64),       # early decode: splits past the keys are empty
    (4, 4, 130, 129, 125, 64),    # D over two invocations; the last split holds 1 key
])
def test_split_cache_attention_matches_its_reference(gpu, rng, hq, hkv, d, ctx, start, chunk):
    s = 4
    g, blob, _, _ = _cache_graph(s, hq, hkv, d, ctx, prefill=start)
    xs = _sdpa_inputs(rng, 0, start, hq, hkv, d) + _sdpa_inputs(rng, start, s, hq, hkv, d)
    plan, native = _run(g, blob, xs, chunk)
    assert sum("sdpa_combine" in k.name for k in plan.kernels) == 2
    env = run_reference(g, dict(zip(g.input_ids, xs, strict=True)), blob)
    # The window's own output against the split arithmetic over the same cache rows.
    q, k, v = (x[0].transpose(1, 0, 2)[None] for x in xs[5:8])
    kc = np.concatenate([xs[2][0], xs[6][0]]).transpose(1, 0, 2)[None]
    vc = np.concatenate([xs[3][0], xs[7][0]]).transpose(1, 0, 2)[None]
    n_keys = start + np.arange(s) + 1
    split = split_attention_reference(q, kc, vc, 1 / np.sqrt(d), n_keys, chunk)
    whole = tiled_attention_reference(q, kc, vc, 1 / np.sqrt(d), n_keys)
    assert_close(split, whole, rel=1e-6, what="split vs unsplit reference")
    assert_close(native[1], split.transpose(0, 2, 1, 3), rel=1e-6, what="split kernel")
    assert_close(native[1], env.get(g.output_ids[1]), rel=1e-5, what="vs the interpreter")


def test_split_fixed_keys_with_a_mask(gpu, rng):
    qs, ks = (1, 6, 3, 24), (1, 2, 333, 24)
    mask = np.clip(_randn(rng, (1, 6, 3, 333), 2.0), -3.0, 0.0)
    g, blob = _sdpa_graph(qs, ks, mask, 0.2)
    xs = [_randn(rng, qs), _randn(rng, ks), _randn(rng, ks)]
    _, (out,) = _run(g, blob, xs, 128)
    ref = split_attention_reference(*xs, np.float32(0.2), np.full(3, 333), 128, mask)
    assert_close(out, ref, rel=1e-6, what="split sdpa with a mask")
