"""aten.gather (an index per output element along one dim), aten.permute (the view op, run as
a permuted copy) and aten.alias_copy (an identity copy): GPU against the reference and the
reference against an independent numpy formula, exactly, on every storage kind."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from test_op_layout_gather import _rand
from webpte.errors import PlanError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

GATHER = "aten.gather.default"


def gather_loops(x, dim, index):
    """torch.gather written as its definition, one element at a time (indices clamped)."""
    out = np.empty(index.shape, x.dtype)
    for p in np.ndindex(*index.shape):
        src = list(p)
        src[dim] = min(max(int(index[p]), 0), x.shape[dim] - 1)
        out[p] = x[tuple(src)]
    return out


def gather_graph(shape, dim, ishape, dtype, idtype=np.int64):
    b = GraphBuilder()
    x, i = b.tensor(dtype, shape), b.tensor(idtype, ishape)
    o = b.tensor(dtype, ishape)
    b.op(GATHER, x, b.scalar(dim), i, b.scalar(False), o)
    return b.build([x, i], [o])


GATHERS = [
    ((3, 5, 7), 1, (3, 2, 7), np.float32),      # the exported form: torch.gather(x, 1, i)
    ((5, 37), 0, (11, 37), np.float32),         # more index rows than x rows (repeats)
    ((4, 6, 3), -1, (2, 5, 9), np.int32),       # index smaller in other dims, dim -1
    ((7, 13), 1, (7, 1), np.int8),              # packed int8, one column
    ((2, 3, 5, 2), 2, (1, 3, 4, 2), np.uint8),  # rank 4, packed uint8, size-1 dim
    ((6,), 0, (17,), np.bool_),                 # rank 1, bool
    ((1, 1), 0, (1, 1), np.float32),            # size-1 everything
    ((3, 300), 1, (3, 293), np.float32),        # more than one workgroup
]


@pytest.mark.parametrize("shape,dim,ishape,dtype", GATHERS, ids=[str(c[:3]) for c in GATHERS])
def test_gather(gpu, rng, shape, dim, ishape, dtype):
    g, blob = gather_graph(shape, dim, ishape, dtype)
    x = _rand(rng, shape, dtype)
    index = rng.integers(0, shape[dim], ishape).astype(np.int64)
    (out,), (ref,) = run_graph_both(g, blob, [x, index])
    d = dim % len(shape)
    assert_close(ref, gather_loops(x, d, index), exact=True, what="reference vs loops")
    if all(ishape[k] == shape[k] for k in range(len(shape)) if k != d):
        assert_close(ref, np.take_along_axis(x, index, d), exact=True,
                     what="reference vs take_along_axis")
    assert_close(out, ref, exact=True, what="gather")


def test_gather_int32_index_and_out_of_range_clamped(gpu, rng):
    g, blob = gather_graph((4, 5), 1, (4, 6), np.float32, np.int32)
    x = _rand(rng, (4, 5), np.float32)
    index = np.array([[0, 4, -1, 5, 99, -7]] * 4, np.int32)
    (out,), (ref,) = run_graph_both(g, blob, [x, index])
    assert_close(ref, x[:, [0, 4, 0, 4, 4, 0]], exact=True, what="clamped reference")
    assert_close(out, ref, exact=True, what="clamped gather")


@pytest.mark.parametrize("shape,dim,ishape,why", [
    ((3, 4), 1, (4, 2), "no larger size outside dim 1"),
    ((3, 4), 0, (3,), "rank of x"),
])
def test_gather_bad_shapes(shape, dim, ishape, why):
    g, _ = gather_graph(shape, dim, ishape, np.float32)
    with pytest.raises(PlanError, match=why):
        lower(g)


@pytest.mark.parametrize("shape,perm,dtype", [
    ((2, 3, 5, 7), (0, 2, 3, 1), np.float32),
    ((3, 5, 4), (2, 0, 1), np.int8),
    ((1, 7, 1), (-1, 1, 0), np.int32),
])
def test_permute_view_op(gpu, rng, shape, perm, dtype):
    b = GraphBuilder()
    x = b.tensor(dtype, shape)
    o = b.tensor(dtype, [shape[p] for p in perm])
    b.op("aten.permute.default", x, b.scalar(list(perm)), o)
    g, blob = b.build([x], [o])
    xv = _rand(rng, shape, dtype)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    assert_close(ref, np.transpose(xv, perm), exact=True, what="reference vs transpose")
    assert_close(out, ref, exact=True, what="permute")


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_alias_copy(gpu, rng, dtype):
    # alias_copy between two ops: the output may share the input's buffer or be copied.
    b = GraphBuilder()
    x = b.tensor(dtype, (3, 37))
    a, o = b.tensor(dtype, (3, 37)), b.tensor(dtype, (37, 3))
    b.op("aten.alias_copy.default", x, a)
    b.op("aten.permute_copy.default", a, b.scalar([1, 0]), o)
    g, blob = b.build([x], [a, o])
    xv = _rand(rng, (3, 37), dtype)
    (out_a, out_o), (ref_a, ref_o) = run_graph_both(g, blob, [xv])
    assert_close(ref_a, xv, exact=True, what="reference alias")
    assert_close(out_a, xv, exact=True, what="alias_copy")
    assert_close(out_o, xv.T, exact=True, what="permute of the alias")
