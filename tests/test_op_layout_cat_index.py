"""cat (grouped past 7 inputs), index_select and embedding (clamped indices), and the int8
prepack, on f32, i32, packed int8/uint8 and bool, exactly against numpy."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_layout_gather import _rand
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder


def _cat_graph(shapes, dim, dtype, out_shape=None, dtypes=None):
    b = GraphBuilder()
    xs = [b.tensor(dt, s) for s, dt in zip(shapes, dtypes or [dtype] * len(shapes), strict=True)]
    if out_shape is None:
        out_shape = np.concatenate([np.empty(s) for s in shapes if s != (0,)], dim).shape
    o = b.tensor(dtype, out_shape)
    b.op("aten.cat.default", b.value_list(xs), b.scalar(dim), o)
    return b.build(xs, [o])


CATS = [
    ([(2, 3), (2, 3), (2, 3)], 0, np.float32),
    ([(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1, np.int8),         # uneven, packed
    ([(2, 3, 1), (2, 3, 4), (2, 3, 2)], -1, np.bool_),
    ([(3, 5), (3, 0), (0,), (3, 2)], 1, np.int32),           # empty and legacy (0,) inputs
    ([(2, k) for k in (1, 2, 3, 1, 2, 3, 1, 2, 3)], 1, np.float32),   # 9 inputs: 2 groups
    ([(k, 3) for k in (1, 2, 1, 3, 1, 1, 2, 1, 1, 2, 1, 3, 1, 1, 1)], 0, np.int8),  # 3 groups
    ([(3, k) for k in (1, 1, 1, 1, 1, 1, 1, 3)], 1, np.uint8),  # words span both groups
]


@pytest.mark.parametrize("shapes,dim,dtype", CATS, ids=[f"{len(c[0])}x{c[2].__name__}"
                                                        for c in CATS])
def test_cat(gpu, rng, shapes, dim, dtype):
    g, blob = _cat_graph(shapes, dim, dtype)
    groups = -(-sum(1 for s in shapes if 0 not in s) // 7)
    assert len(lower(g).dispatches) == groups
    xs = [_rand(rng, s, dtype) for s in shapes]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    expect = np.concatenate([x for x in xs if x.shape != (0,)], dim)
    assert_close(ref, expect, exact=True, what="reference vs np.concatenate")
    assert_close(out, ref, exact=True, what="cat")


def test_cat_rejects_malformed_and_mixed_inputs():
    with pytest.raises(PlanError, match="do not fit"):
        lower(_cat_graph([(2, 3), (3, 3)], 1, np.float32, out_shape=(2, 6))[0])
    with pytest.raises(PlanError, match="give 5 along dim 0"):
        lower(_cat_graph([(2, 3), (3, 3)], 0, np.float32, out_shape=(6, 3))[0])
    with pytest.raises(UnsupportedOpError, match="casts no input"):
        lower(_cat_graph([(2, 3), (2, 3)], 0, np.float32,
                         dtypes=[np.float32, np.int32])[0])


def _index_select_graph(shape, dim, n_index, dtype, index_dtype=np.int32):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    i = b.tensor(index_dtype, (n_index,))
    d = dim % len(shape)
    o = b.tensor(dtype, shape[:d] + (n_index,) + shape[d + 1:])
    b.op("aten.index_select.default", x, b.scalar(dim), i, o)
    return b.build([x, i], [o])


@pytest.mark.parametrize("shape,dim,index,dtype", [
    ((5,), 0, [0, 2, 4, 1], np.float32),
    ((3, 7, 5), 1, [6, 0, 2, 2, 6], np.int8),
    ((3, 7, 5), -1, [4, 1, 3], np.bool_),
    ((4, 9), 0, [3], np.int32),
])
def test_index_select(gpu, rng, shape, dim, index, dtype):
    g, blob = _index_select_graph(shape, dim, len(index), dtype)
    x = _rand(rng, shape, dtype)
    idx = np.array(index, np.int32)
    (out,), (ref,) = run_graph_both(g, blob, [x, idx])
    assert_close(ref, np.take(x, idx, axis=dim), exact=True, what="reference vs np.take")
    assert_close(out, ref, exact=True, what="index_select")


def test_index_select_clamps_out_of_range_indices(gpu, rng):
    """torch raises on these; the kernel cannot, so both sides clamp into the dim."""
    g, blob = _index_select_graph((3, 4), 1, 4, np.float32, np.int64)
    x = _rand(rng, (3, 4), np.float32)
    idx = np.array([-5, 9, 1, 4], np.int64)
    (out,), (ref,) = run_graph_both(g, blob, [x, idx])
    assert_close(ref, x[:, [0, 3, 1, 3]], exact=True, what="reference clamps")
    assert_close(out, ref, exact=True, what="index_select")


@pytest.mark.parametrize("vocab,dim,index_shape,dtype", [
    (16, 8, (4,), np.float32),
    (37, 5, (2, 3), np.float32),
    (11, 7, (3, 1), np.int8),                      # packed weights, rows not word-aligned
])
def test_embedding(gpu, rng, vocab, dim, index_shape, dtype):
    b = GraphBuilder()
    w = _rand(rng, (vocab, dim), dtype)
    wc = b.constant(w)
    i = b.tensor(np.int64, index_shape)
    o = b.tensor(dtype, index_shape + (dim,))
    b.op("aten.embedding.default", wc, i, b.scalar(-1), b.scalar(False), b.scalar(False), o)
    g, blob = b.build([i], [o])
    idx = rng.integers(0, vocab, index_shape).astype(np.int64)
    idx.flat[0] = vocab - 1
    (out,), (ref,) = run_graph_both(g, blob, [idx])
    assert_close(ref, w[idx], exact=True, what="reference vs w[idx]")
    assert_close(out, ref, exact=True, what="embedding")


def test_index_ops_reject_malformed_forms():
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 4))
    i = b.tensor(np.int32, (2, 2))
    o = b.tensor(np.float32, (3, 4))
    b.op("aten.index_select.default", x, b.scalar(0), i, o)
    with pytest.raises(PlanError, match="0-d or 1-d"):
        lower(b.build([x, i], [o])[0])
    b = GraphBuilder()
    w = b.tensor(np.float32, (2, 3, 4))
    i = b.tensor(np.int32, (5,))
    o = b.tensor(np.float32, (5, 4))
    b.op("aten.embedding.default", w, i, b.scalar(-1), b.scalar(False), b.scalar(False), o)
    with pytest.raises(PlanError, match="must be 2-d"):
        lower(b.build([w, i], [o])[0])


def test_int8_prepack_feeds_a_gather(gpu, rng):
    """et_vk.prepack of an int8 constant shares the constant's buffer; a flip reads it."""
    b = GraphBuilder()
    w = _rand(rng, (3, 5, 7), np.int8)
    c = b.constant(w)
    pw = b.tensor(np.int8, w.shape)
    b.op("et_vk.prepack.default", c, pw)
    o = b.tensor(np.int8, w.shape)
    b.op("aten.flip.default", pw, b.scalar((1, 2)), o)
    x = b.tensor(np.float32, (1,))  # a graph needs an input
    g, blob = b.build([x], [o, pw])
    assert len(lower(g).dispatches) == 1
    (out, packed), (ref, ref_packed) = run_graph_both(g, blob, [np.ones(1, np.float32)])
    assert_close(ref_packed, w, exact=True, what="reference prepack")
    assert_close(packed, w, exact=True, what="prepack")
    assert_close(ref, w[:, ::-1, ::-1], exact=True, what="reference flip")
    assert_close(out, ref, exact=True, what="flip of the prepacked constant")
