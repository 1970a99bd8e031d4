"""Gather-map layout ops: slice_copy, slice_scatter, split_with_sizes_copy, expand_copy,
repeat, flip, constant_pad_nd, pixel_shuffle/unshuffle, on every storage kind (f32, i32, packed
int8/uint8, bool), each against the reference and the reference against an independent
numpy formula, exactly."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.layout.slice import slice_bounds
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

INT64_MAX = 2 ** 63 - 1


def _rand(rng, shape, dtype):
    """Seeded values that fit `dtype`; never all zeros."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        v = rng.integers(0, 2, shape).astype(bool)
        v.flat[0] = True
        return v
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape,
                        endpoint=True).astype(dtype)


def _run(rng, name, shape, out_shape, dtype, *scalars):
    """One op x -> out with scalar arguments between; returns (x, gpu out, reference out)."""
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = b.tensor(dtype, out_shape)
    b.op(name, x, *[b.scalar(v) for v in scalars], o)
    g, blob = b.build([x], [o])
    xv = _rand(rng, shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    return xv, out, ref


def _check(out, ref, expect, what):
    assert_close(ref, expect, exact=True, what=f"reference vs numpy ({what})")
    assert_close(out, ref, exact=True, what=what)


SLICES = [
    ((3, 8, 4), 1, 1, 5, 1, np.float32),
    ((3, 8, 4), 1, 0, 8, 2, np.float32),            # step 2
    ((3, 8, 4), -1, 1, -1, 1, np.int8),             # negative end, packed, dim -1
    ((5, 37), 1, -30, INT64_MAX, 3, np.uint8),     # negative start, end past the size
    ((7, 3), 0, None, None, 4, np.bool_),           # Null bounds
    ((4, 5), 0, 9, 12, 1, np.int32),                # start past the end: empty
    ((2, 6), 1, 4, 2, 1, np.float32),               # end before the start: empty
]


@pytest.mark.parametrize("shape,dim,start,end,step,dtype", SLICES,
                         ids=[str(c[:5]) for c in SLICES])
def test_slice_copy(gpu, rng, shape, dim, start, end, step, dtype):
    d = dim % len(shape)
    window = slice(start, None if end == INT64_MAX else end, step)
    out_shape = np.empty(shape)[(slice(None),) * d + (window,)].shape
    x, out, ref = _run(rng, "aten.slice_copy.Tensor", shape, out_shape, dtype, dim, start,
                       end, step)
    _check(out, ref, x[(slice(None),) * d + (window,)], "slice")


SCATTERS = [
    ((7, 5), 0, 2, 5, np.float32),                  # a buffer's rows: `buf[2:5] = src`
    ((3, 9, 5), 1, -6, INT64_MAX, np.int8),         # packed: words shared with self's bytes
    ((4, 13), -1, 0, 13, np.int32),                 # the whole dim
    ((2, 6), 1, 1, 4, np.bool_),
    ((2, 6), 1, 4, 2, np.float32),                  # an empty window: a copy of self
]


@pytest.mark.parametrize("shape,dim,start,end,dtype", SCATTERS,
                         ids=[str(c[:4]) for c in SCATTERS])
def test_slice_scatter(gpu, rng, shape, dim, start, end, dtype):
    d = dim % len(shape)
    window = (slice(None),) * d + (slice(start, None if end == INT64_MAX else end),)
    src_shape = np.empty(shape)[window].shape
    b = GraphBuilder()
    x, src, o = b.tensor(dtype, shape), b.tensor(dtype, src_shape), b.tensor(dtype, shape)
    b.op("aten.slice_scatter.default", x, src, *[b.scalar(v) for v in (dim, start, end, 1)], o)
    g, blob = b.build([x, src], [o])
    xv, sv = _rand(rng, shape, dtype), _rand(rng, src_shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv, sv])
    expect = xv.copy()
    expect[window] = sv
    _check(out, ref, expect, "slice_scatter")


def test_slice_scatter_refuses_steps():
    b = GraphBuilder()
    x, src, o = (b.tensor(np.float32, s) for s in ((6, 3), (3, 3), (6, 3)))
    b.op("aten.slice_scatter.default", x, src, *[b.scalar(v) for v in (0, 0, 6, 2)], o)
    with pytest.raises(UnsupportedOpError, match="step 2"):
        lower(b.build([x, src], [o])[0])


def test_slice_bounds_follow_python_slicing():
    for size in (0, 1, 5):
        for start in (None, -7, -1, 0, 2, 9):
            for end in (None, -9, -2, 0, 3, INT64_MAX):
                for step in (1, 2, 3):
                    s, n = slice_bounds(start, end, step, size)
                    want = range(size)[slice(start, None if end == INT64_MAX else end, step)]
                    assert list(range(s, s + n * step, step)) == list(want)


@pytest.mark.parametrize("shape,sizes,dim,dtype", [
    ((1, 8, 4, 4), (2, 3, 3), 1, np.float32),
    ((5, 4), (3, 0, 2), 0, np.int8),                # an empty chunk
    ((2, 9), (4, 5), -1, np.bool_),
    ((3, 7), (7,), 1, np.int32),
])
def test_split_with_sizes_copy(gpu, rng, shape, sizes, dim, dtype):
    d = dim % len(shape)
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    outs = [b.tensor(dtype, shape[:d] + (s,) + shape[d + 1:]) for s in sizes]
    b.op("aten.split_with_sizes_copy.default", x, b.scalar(sizes), b.scalar(dim),
         b.value_list(outs))
    g, blob = b.build([x], outs)
    xv = _rand(rng, shape, dtype)
    got, refs = run_graph_both(g, blob, [xv])
    for out, ref, chunk in zip(got, refs, np.split(xv, np.cumsum(sizes)[:-1], axis=d), strict=True):
        _check(out, ref, chunk, f"split chunk of {chunk.shape}")


@pytest.mark.parametrize("shape,sizes,dtype", [
    ((1, 4), (3, 4), np.float32),
    ((3, 1), (2, -1, 5), np.int8),                  # a new leading dim, -1 keeps a dim
    ((1,), (300,), np.bool_),
    ((2, 1, 3), (2, 7, 3), np.uint8),
])
def test_expand_copy(gpu, rng, shape, sizes, dtype):
    out_shape = np.broadcast_shapes(shape, tuple(max(s, 1) for s in sizes))
    x, out, ref = _run(rng, "aten.expand_copy.default", shape, out_shape, dtype, sizes, False)
    _check(out, ref, np.broadcast_to(x, out_shape), "expand")


def _tile_oracle(x, reps):
    """out[i] = x[i % n] per dim, as index arrays."""
    x = x.reshape((1,) * (len(reps) - x.ndim) + x.shape)
    idx = np.ix_(*[np.arange(n * r) % n for n, r in zip(x.shape, reps, strict=True)])
    return x[idx]


@pytest.mark.parametrize("shape,reps,dtype", [
    ((3,), (2,), np.float32),
    ((3, 5), (1, 3, 2), np.int8),                   # prepended dim
    ((2, 5, 7), (2, 1, 3), np.bool_),
    ((5,), (2, 3, 1), np.int32),
])
def test_repeat(gpu, rng, shape, reps, dtype):
    out_shape = _tile_oracle(np.empty(shape), reps).shape
    x, out, ref = _run(rng, "aten.repeat.default", shape, out_shape, dtype, reps)
    _check(out, ref, _tile_oracle(x, reps), "repeat")


@pytest.mark.parametrize("shape,dims,dtype", [
    ((5, 7, 11), (0, 2), np.float32),
    ((3, 5, 7, 2), (1, 3), np.int8),
    ((13,), (-1,), np.uint8),
    ((4, 6), (0, 1), np.bool_),                     # both: collapses to one reversed axis
    ((2, 3), (), np.int32),
])
def test_flip(gpu, rng, shape, dims, dtype):
    x, out, ref = _run(rng, "aten.flip.default", shape, shape, dtype, dims)
    rev = [slice(None)] * len(shape)
    for d in dims:
        rev[d] = slice(None, None, -1)
    _check(out, ref, x[tuple(rev)], "flip")


def _pad_oracle(x, pads, value):
    """Element by element: out[o] = x[o - before] where that is inside x, else value."""
    rank = x.ndim
    before = [0] * rank
    after = [0] * rank
    for k in range(len(pads) // 2):
        before[rank - 1 - k], after[rank - 1 - k] = pads[2 * k], pads[2 * k + 1]
    shape = tuple(n + lo + hi for n, lo, hi in zip(x.shape, before, after, strict=True))
    out = np.empty(shape, x.dtype)
    for o in np.ndindex(*shape):
        i = tuple(a - lo for a, lo in zip(o, before, strict=True))
        inside = all(0 <= a < n for a, n in zip(i, x.shape, strict=True))
        out[o] = x[i] if inside else value
    return out


@pytest.mark.parametrize("shape,pads,value,dtype", [
    ((3, 8), (1, 2), 0.0, np.float32),
    ((2, 4, 8), (1, 1, 2, 0), -1.5, np.float32),
    ((2, 5, 7), (-2, 1, 0, -3), 7.0, np.int8),      # negative pads crop
    ((3, 5), (2, 2, 1, 1), 1.0, np.bool_),
    ((4, 3), (0, 0, -1, 2), -300.0, np.int32),
    ((6,), (-6, 0), 2.0, np.uint8),                 # cropped to nothing
])
def test_constant_pad_nd(gpu, rng, shape, pads, value, dtype):
    expect_shape = _pad_oracle(np.empty(shape), pads, 0).shape
    x, out, ref = _run(rng, "aten.constant_pad_nd.default", shape, expect_shape, dtype, pads,
                       value)
    _check(out, ref, _pad_oracle(x, pads, np.array(value).astype(dtype)), "pad")


def test_pad_with_minus_infinity(gpu, rng):
    """The pad value is a runtime word: non-finite pads need no WGSL literal."""
    x, out, ref = _run(rng, "aten.constant_pad_nd.default", (2, 3), (4, 3), np.float32,
                       (0, 0, 1, 1), float("-inf"))
    _check(out, ref, _pad_oracle(x, (0, 0, 1, 1), -np.inf), "pad -inf")


def _shuffle_oracle(x, r):
    *batch, c, h, w = x.shape
    out = np.empty((*batch, c // (r * r), h * r, w * r), x.dtype)
    for idx in np.ndindex(*out.shape):
        *b, oc, oh, ow = idx
        out[idx] = x[(*b, oc * r * r + (oh % r) * r + ow % r, oh // r, ow // r)]
    return out


@pytest.mark.parametrize("shape,r,dtype", [
    ((1, 8, 2, 3), 2, np.float32),
    ((2, 9, 2, 3), 3, np.int8),
    ((4, 2, 2), 2, np.float32),                     # no batch dim
    ((2, 1, 4, 3, 5), 2, np.bool_),                 # two batch dims
])
def test_pixel_shuffle_and_unshuffle(gpu, rng, shape, r, dtype):
    *batch, c, h, w = shape
    out_shape = (*batch, c // (r * r), h * r, w * r)
    x, out, ref = _run(rng, "aten.pixel_shuffle.default", shape, out_shape, dtype, r)
    _check(out, ref, _shuffle_oracle(x, r), "pixel_shuffle")
    y, back, ref_back = _run(rng, "aten.pixel_unshuffle.default", out_shape, shape, dtype, r)
    assert_close(_shuffle_oracle(ref_back, r), y, exact=True, what="shuffle(unshuffle(y))")
    assert_close(back, ref_back, exact=True, what="pixel_unshuffle")


def _graph(name, shape, out_shape, *scalars, dtype=np.float32):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = b.tensor(dtype, out_shape)
    b.op(name, x, *[b.scalar(v) for v in scalars], o)
    return b.build([x], [o])[0]


def _split(shape, sizes, dim, out_shapes):
    b = GraphBuilder()
    x = b.tensor(np.float32, shape)
    outs = [b.tensor(np.float32, s) for s in out_shapes]
    b.op("aten.split_with_sizes_copy.default", x, b.scalar(sizes), b.scalar(dim),
         b.value_list(outs))
    return b.build([x], outs)[0]


@pytest.mark.parametrize("graph,match", [
    (_graph("aten.slice_copy.Tensor", (4, 5), (4, 5), 1, 0, 5, 0), "step must be positive"),
    (_graph("aten.slice_copy.Tensor", (4, 5), (4, 2), 1, 0, 5, 2), "slice gives dims"),
    (_split((5, 4), (3, 3), 0, [(3, 4), (3, 4)]), "do not split"),
    (_split((5, 4), (3, 2), 0, [(3, 4), (3, 4)]), "split gives dims"),
    (_graph("aten.expand_copy.default", (2, 3), (4, 3), (4, 3), False), "cannot expand"),
    (_graph("aten.expand_copy.default", (2, 3), (3,), (3,), False), "fewer dims"),
    (_graph("aten.repeat.default", (2, 3), (6,), (3,)), "do not fit"),
    (_graph("aten.flip.default", (2, 3), (2, 3), (1, -1)), "repeat a dim"),
    (_graph("aten.flip.default", (2, 3), (2, 3), (2,)), "out of range"),
    (_graph("aten.constant_pad_nd.default", (2, 3), (2, 4), (1,), 0.0), "pair up"),
    (_graph("aten.constant_pad_nd.default", (2, 3), (2, 0), (-2, -2), 0.0), "crops more"),
    (_graph("aten.pixel_shuffle.default", (1, 6, 2, 2), (1, 1, 4, 4), 2), "multiple of"),
    (_graph("aten.pixel_unshuffle.default", (1, 1, 3, 4), (1, 4, 1, 2), 2), "multiples"),
    (_graph("aten.pixel_shuffle.default", (8, 2), (2, 4), 2), "rank >= 3"),
    (_graph("aten.repeat.default", (2, 3), (2, 3), 1.5), "should be an IntList"),
])
def test_gather_ops_reject_malformed_forms(graph, match):
    with pytest.raises(PlanError, match=match):
        lower(graph)


def test_flip_and_expand_maps_collapse():
    """A flip of every dim is one reversed axis; an expand of a scalar one stride-0 axis."""
    plan = lower(_graph("aten.flip.default", (4, 6), (4, 6), (0, 1)))
    assert "axes (outermost first): [24]" in plan.kernels[0].wgsl
    assert "(-1i)" in plan.kernels[0].wgsl
    plan = lower(_graph("aten.expand_copy.default", (1, 1), (5, 7, 3), (5, 7, 3), False))
    assert "axes (outermost first): [105]" in plan.kernels[0].wgsl
