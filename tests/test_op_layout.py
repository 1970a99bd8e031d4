"""Copies, casts and layout ops: aliasing vs forced copies, strided permute/select, packed int8."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.layout.gather import Axis, GatherMap, collapse, strided_map
from webpte.planner import lower
from webpte.planner.lowering import Lowering
from webpte.pte.builder import GraphBuilder


def _rand(rng, shape, dtype):
    """Seeded values that fit `dtype`; never all zeros."""
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape,
                        endpoint=True).astype(dtype)


@pytest.fixture(params=[False, True], ids=["alias", "copy"])
def force_copy(request, monkeypatch):
    """Run each identity-op test twice: with aliasing allowed, and with every alias refused."""
    if request.param:
        monkeypatch.setattr(Lowering, "alias", lambda self, dst, src: False)
    return request.param


def _identity_op(b, name, x, shape, out_shape, dtype):
    o = b.tensor(dtype, out_shape)
    if name == "aten.clone.default":
        b.op(name, x, b.scalar(None), o)
    elif name == "aten.view_copy.default":
        b.op(name, x, b.scalar((-1,) + tuple(out_shape[1:])), o)
    elif name == "aten.squeeze_copy.dims":
        b.op(name, x, b.scalar((0, -1, 1)), o)  # dim 1 is not size 1: kept, as in torch
    elif name == "aten.unsqueeze_copy.default":
        b.op(name, x, b.scalar(-2), o)  # counts from the end of the output's dims
    elif name == "aten._to_copy.default":
        b.op(name, x, *[b.scalar(None)] * 4, b.scalar(False), b.scalar(None), o)
    else:
        b.op(name, x, *[b.scalar(None)] * 4, b.scalar(False), b.scalar(tuple(range(len(shape)))),
             o)
    return o


IDENTITY = [
    ("aten.clone.default", (3, 7, 5), (3, 7, 5)),
    ("aten.view_copy.default", (6, 5, 7), (3, 2, 35)),
    ("aten.squeeze_copy.dims", (1, 9, 1), (9,)),
    ("aten.unsqueeze_copy.default", (3, 7), (3, 1, 7)),
    ("aten._to_copy.default", (5, 13), (5, 13)),
    ("dim_order_ops._to_dim_order_copy.default", (2, 3, 11), (2, 3, 11)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int8], ids=["f32", "i8"])
@pytest.mark.parametrize("name,shape,out_shape", IDENTITY, ids=[c[0] for c in IDENTITY])
def test_identity_op_of_graph_input_is_graph_output(gpu, rng, force_copy, name, shape,
                                                    out_shape, dtype):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = _identity_op(b, name, x, shape, out_shape, dtype)
    g, blob = b.build([x], [o])
    assert len(lower(g).dispatches) == (1 if force_copy else 0)
    xv = _rand(rng, shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    assert_close(ref, xv.reshape(out_shape), exact=True, what="reference vs reshape")
    assert_close(out, ref, exact=True, what=name)


def test_view_add_permute_chain(gpu, rng, force_copy):
    """x (2,3,4) -view-> (6,4) + c -> permute (4,6); the view and its input are outputs too."""
    b = GraphBuilder()
    x = b.tensor(np.float32, (2, 3, 4))
    v = b.tensor(np.float32, (6, 4))
    b.op("aten.view_copy.default", x, b.scalar((6, -1)), v)
    c = b.constant(rng.standard_normal(4).astype(np.float32))
    s = b.tensor(np.float32, (6, 4))
    b.op("aten.add.Tensor", v, c, b.scalar(1), s)
    p = b.tensor(np.float32, (4, 6))
    b.op("aten.permute_copy.default", s, b.scalar((1, 0)), p)
    g, blob = b.build([x], [p, v, x])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    outs, refs = run_graph_both(g, blob, [xv])
    expect = (xv.reshape(6, 4) + b_const(blob, g, c)).T
    assert_close(refs[0], expect, rel=1e-6, what="reference vs numpy")
    for out, ref, what in zip(outs, refs, ("permuted sum", "view", "input"), strict=True):
        assert_close(out, ref, rel=1e-6, what=what)


def b_const(blob, g, vid):
    t = g.values[vid]
    ref = g.constants[t.constant_id]
    return np.frombuffer(blob[ref.offset: ref.offset + ref.nbytes], np.float32).reshape(t.dims)


def test_prepack_feeds_an_op_and_an_output(gpu, rng, force_copy):
    b = GraphBuilder()
    w = rng.standard_normal((3, 5)).astype(np.float32)
    c = b.constant(w)
    pw = b.tensor(np.float32, (3, 5))
    b.op("et_vk.prepack.default", c, pw)
    x = b.tensor(np.float32, (3, 5))
    o = b.tensor(np.float32, (3, 5))
    b.op("aten.mul.Tensor", x, pw, o)
    g, blob = b.build([x], [o, pw])
    xv = rng.standard_normal((3, 5)).astype(np.float32)
    (out, packed), (ref, ref_packed) = run_graph_both(g, blob, [xv])
    assert_close(ref_packed, w, exact=True, what="reference prepack")
    assert_close(packed, w, exact=True, what="prepack")
    assert_close(out, xv * w, rel=1e-6)


PERMUTES = [
    ((2, 3, 5, 7), (0, 2, 1, 3), np.float32),
    ((13, 300), (1, 0), np.float32),              # > one workgroup, odd
    ((1, 4, 1, 5), (3, -2, 1, 0), np.float32),    # size-1 dims, negative dim
    ((3, 5, 7), (2, 0, 1), np.int8),              # packed in and out, 105 elements
    ((4, 9, 2), (1, 2, 0), np.int32),
    ((7,), (0,), np.uint8),
]


@pytest.mark.parametrize("shape,perm,dtype", PERMUTES, ids=[str(c[:2]) for c in PERMUTES])
def test_permute_copy(gpu, rng, shape, perm, dtype):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = b.tensor(dtype, [shape[p] for p in perm])
    b.op("aten.permute_copy.default", x, b.scalar(perm), o)
    g, blob = b.build([x], [o])
    xv = _rand(rng, shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    # Independent oracle: an einsum with the permuted subscripts.
    letters = "abcd"[: len(shape)]
    expect = np.einsum(f"{letters}->{''.join(letters[p] for p in perm)}", xv)
    assert_close(ref, expect, exact=True, what="reference vs einsum")
    assert_close(out, ref, exact=True)


SELECTS = [
    ((1, 4, 9), 1, -1, np.float32),               # the logits' last row
    ((3, 5, 7), 0, 2, np.float32),
    ((3, 5, 7), -1, 0, np.int8),                  # packed, strided
    ((6, 300), 0, 4, np.int32),                   # contiguous slab > one workgroup
    ((2, 1, 3), 1, -1, np.float32),
]


@pytest.mark.parametrize("shape,dim,index,dtype", SELECTS, ids=[str(c[:3]) for c in SELECTS])
def test_select_copy(gpu, rng, shape, dim, index, dtype):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    d = dim % len(shape)
    o = b.tensor(dtype, shape[:d] + shape[d + 1:])
    b.op("aten.select_copy.int", x, b.scalar(dim), b.scalar(index), o)
    g, blob = b.build([x], [o])
    xv = _rand(rng, shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    expect = xv[(slice(None),) * d + (index,)]
    assert_close(ref, expect, exact=True, what="reference vs slicing")
    assert_close(out, ref, exact=True)


def _cast_graph(shape, dtypes):
    """A chain of _to_copy casts through `dtypes`; every intermediate is an output."""
    b = GraphBuilder()
    x = b.tensor(dtypes[0], shape)
    outs, cur = [], x
    for dt in dtypes[1:]:
        o = b.tensor(dt, shape)
        b.op("aten._to_copy.default", cur, *[b.scalar(None)] * 4, b.scalar(False),
             b.scalar(None), o)
        outs.append(o)
        cur = o
    return b.build([x], outs)


def _torch_like_cast(v, dt):
    """Independent cast oracle: truncate toward zero, then keep the low byte (torch)."""
    if np.dtype(dt) == np.bool_:
        return v != 0
    if np.dtype(dt).kind in "iu" and v.dtype.kind == "f":
        v = np.trunc(v.astype(np.float64)).astype(np.int64)
    return v.astype(np.int64).astype(dt) if np.dtype(dt).kind in "iu" else v.astype(dt)


CASTS = [
    ((7,), [np.float32, np.int8, np.float32]),               # packed round trip, odd numel
    ((3, 101), [np.float32, np.int32, np.float32]),
    ((5, 9), [np.float32, np.uint8, np.int32, np.int8]),      # wrap to the low byte
    ((4, 5), [np.int64, np.float32, np.bool_, np.float32]),
    ((1, 13), [np.int8, np.uint8, np.int64, np.int32]),       # int64 -> int32 may alias
    ((2, 3), [np.bool_, np.int8, np.bool_]),
]


@pytest.mark.parametrize("shape,dtypes", CASTS,
                         ids=["-".join(np.dtype(d).name for d in c[1]) for c in CASTS])
def test_to_copy_casts(gpu, rng, shape, dtypes):
    g, blob = _cast_graph(shape, dtypes)
    src = np.dtype(dtypes[0])
    if src.kind == "f":
        x = rng.uniform(-300, 300, shape).astype(src)
        x.flat[:5] = [2.5, -2.5, -0.75, 0.0, 127.9][: x.size]
    elif src == np.bool_:
        x = rng.integers(0, 2, shape).astype(bool)
    else:
        lim = 127 if src.itemsize == 1 else 100000
        x = rng.integers(-lim, lim, shape).astype(src)
        x.flat[0] = 0
    outs, refs = run_graph_both(g, blob, [x])
    expect = x
    for dt, out, ref in zip(dtypes[1:], outs, refs, strict=True):
        expect = _torch_like_cast(expect, dt)
        assert_close(ref, expect.astype(ref.dtype), exact=True,
                     what=f"reference vs oracle ->{np.dtype(dt).name}")
        assert_close(out, ref.astype(out.dtype), exact=True, what=f"->{np.dtype(dt).name}")


def test_int8_cast_is_packed_four_per_word():
    g, _ = _cast_graph((7,), [np.float32, np.int8, np.float32])
    plan = lower(g)
    assert [d.workgroups for d in plan.dispatches] == [(1, 1, 1), (1, 1, 1)]
    assert "out[t] = ((u32(v.x) & 0xffu)" in plan.kernels[0].wgsl  # 4 values per word
    assert min(b.size for b in plan.buffers) == 8  # 7 int8 values in two u32 words


def test_collapse_merges_contiguous_dims():
    def dims_strides(dims, strides):
        m = collapse(strided_map(dims, strides))
        return tuple(a.size for a in m.axes), tuple(a.stride for a in m.axes)

    assert dims_strides((2, 3, 4), (12, 4, 1)) == ((24,), (1,))
    assert dims_strides((4, 1, 6), (1, 99, 4)) == ((4, 6), (1, 4))
    assert dims_strides((1, 1), (5, 1)) == ((1,), (0,))
    assert dims_strides((3, 5, 2), (0, 0, 1)) == ((15, 2), (0, 1))  # expanded axes merge
    assert dims_strides((4, 3), (-3, 1)) == ((4, 3), (-3, 1))      # a flipped axis does not
    bounded = GatherMap((Axis(2, 8), Axis(1, 4, 0, 1), Axis(4, 1)))
    assert collapse(bounded).axes == bounded.axes  # bounded axes stay, even of size 1


def _bad(name, shape, out_shape, *extra, dtype=np.float32):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = b.tensor(dtype, out_shape)
    b.op(name, x, *[b.scalar(v) for v in extra], o)
    return b.build([x], [o])[0]


@pytest.mark.parametrize("graph,error,match", [
    (_bad("dim_order_ops._to_dim_order_copy.default", (2, 3, 4), (2, 3, 4), None, None, None,
          None, False, (0, 2, 1)), UnsupportedOpError, "dim_order"),
    (_bad("aten.clone.default", (3,), (3,), 1), UnsupportedOpError, "memory_format"),
    (_bad("aten._to_copy.default", (3,), (3,), "float", None, None, None, False, None),
     UnsupportedOpError, "must be Null"),
    (_bad("aten._to_copy.default", (3,), (3,), "float"), PlanError, "takes 8 arguments"),
    (_bad("aten.view_copy.default", (6,), (6,), 1.5), PlanError, "should be an IntList"),
    (_bad("aten.view_copy.default", (6,), (4,), (-1, 4)), PlanError, "cannot view"),
    (_bad("aten.view_copy.default", (6,), (3, 2), (2, 3)), PlanError, "view gives dims"),
    (_bad("aten.permute_copy.default", (2, 3), (3, 2), (1, 1)), PlanError, "permutation"),
    (_bad("aten.select_copy.int", (2, 3), (2,), 1, 3), PlanError, "out of range"),
    (_bad("aten.squeeze_copy.dims", (2, 1), (2, 1), (1,)), PlanError, "squeeze gives"),
    (_bad("aten.unsqueeze_copy.default", (2, 3), (2, 3, 1), 1), PlanError, "unsqueeze gives"),
    (_bad("aten.unsqueeze_copy.default", (2, 3), (2, 3, 1), 4), PlanError, "out of range"),
])
def test_layout_unsupported_forms(graph, error, match):
    with pytest.raises(error, match=match):
        lower(graph)


def test_float_to_int_cast_saturates_like_wgsl(gpu):
    """Out-of-range floats saturate to [-2^31, 2^31-128] (WGSL i32(f32)), then keep the low
    byte for int8; in range they truncate toward zero like torch."""
    x = np.array([3e9, -3e9, 1e38, 2147483520.0, -7.9, 7.9, 200.7], np.float32)
    g, blob = _cast_graph(x.shape, [np.float32, np.int32])
    (out,), (ref,) = run_graph_both(g, blob, [x])
    expect = np.array([2147483520, -2 ** 31, 2147483520, 2147483520, -7, 7, 200], np.int32)
    assert_close(ref, expect, exact=True, what="reference")
    assert_close(out, ref, exact=True)
