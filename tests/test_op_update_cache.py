"""llama's update_cache (K/V rows written into a cache in place) and sym_size.int (a dim size
as a SymInt): GPU against the reference and the reference against slice assignment, with
the cache a graph input, a constant (state of its own) or the prepack of one (the
partitioner's form of a registered buffer), and the start an Int or a SymInt."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import InputError, UnsupportedOpError
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.planner.dynamic import specialize
from webpte.pte.builder import GraphBuilder

UPDATE = "update_cache.default"


def written(cache, value, start):
    """The op's definition: rows start.. of every batch replaced by value's."""
    out = cache.copy()
    out[:, start:start + value.shape[1]] = value
    return out


@pytest.mark.parametrize("vshape,ctx,start", [
    ((1, 3, 2, 5), 7, 2),      # the exported test shape: prefill at an offset
    ((2, 3, 5, 7), 11, 8),     # batch 2, rows ending at the last cache row
    ((1, 1, 1, 1), 1, 0),      # size-1 everything
    ((1, 1, 4, 67), 300, 299),  # decode into the last row, several workgroups
])
def test_update_cache_input_cache(gpu, rng, vshape, ctx, start):
    # The cache a graph input (and output): the one-delegate form of a user's cache.
    b, s, h, d = vshape
    g = GraphBuilder()
    v, c = g.tensor(np.float32, vshape), g.tensor(np.float32, (b, ctx, h, d))
    o = g.tensor(np.float32, (1,))
    g.op(UPDATE, v, c, g.scalar(start), o)
    graph, blob = g.build([v, c], [c, o])
    value = rng.standard_normal(vshape).astype(np.float32)
    cache = rng.standard_normal((b, ctx, h, d)).astype(np.float32)
    (out_c, out_o), (ref_c, ref_o) = run_graph_both(graph, blob, [value, cache])
    assert_close(ref_c, written(cache, value, start), exact=True, what="reference vs slices")
    assert_close(out_c, ref_c, exact=True, what="cache")
    assert_close(out_o, np.zeros(1, np.float32), exact=True, what="placeholder")


def stateful_graph(prepacked: bool):
    """pos (int [1]) -> select_as_symint; value [1,2,3,5] into a zero constant cache
    [1,6,3,5] (prepacked or not) at pos; out = clone of the cache."""
    g = GraphBuilder()
    pos, v = g.tensor(np.int64, (1,)), g.tensor(np.float32, (1, 2, 3, 5))
    start = g.symint()
    g.op("et_vk.select_as_symint.default", pos, g.scalar(0), g.scalar(0), start)
    cache = g.constant(np.zeros((1, 6, 3, 5), np.float32))
    if prepacked:
        packed = g.tensor(np.float32, (1, 6, 3, 5))
        g.op("et_vk.prepack.default", cache, packed)
        cache = packed
    o, out = g.tensor(np.float32, (1,)), g.tensor(np.float32, (1, 6, 3, 5))
    g.op(UPDATE, v, cache, start, o)
    g.op("aten.clone.default", cache, g.scalar(None), out)
    return g.build([pos, v], [out])


@pytest.mark.parametrize("prepacked", [False, True], ids=["constant", "prepacked"])
def test_update_cache_state_across_calls(gpu, rng, prepacked):
    graph, blob = stateful_graph(prepacked)
    plan = lower(graph)
    assert any(b.role == "state" for b in plan.buffers)
    ex = Executor(plan, blob)
    ex.poison()
    state: dict = {}
    expect = np.zeros((1, 6, 3, 5), np.float32)
    for pos in (0, 4, 1):   # the third call overwrites rows 1..2 of the first two
        value = rng.standard_normal((1, 2, 3, 5)).astype(np.float32)
        inputs = [np.array([pos], np.int64), value]
        (out,) = ex.run(inputs)
        env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob, state)
        expect = written(expect, value, pos)
        assert_close(env.get(graph.output_ids[0]), expect, exact=True,
                     what=f"reference at {pos}")
        assert_close(out, expect, exact=True, what=f"cache after writing at {pos}")
    ex.reset()
    (out,) = ex.run([np.array([4], np.int64), value])
    assert_close(out, written(np.zeros_like(expect), value, 4), exact=True,
                 what="cache after reset and one write")
    with pytest.raises(InputError, match="outside the 6-row cache"):
        run_reference(graph, dict(zip(graph.input_ids, [np.array([5]), value], strict=True)),
                      blob, {})


def sym_size_graph():
    """x [1, P] -> sym_size(x, -1) = P -> update_cache of value [1,1,2,3] at row P."""
    g = GraphBuilder()
    x, v, c = (g.tensor(np.float32, (1, 6)), g.tensor(np.float32, (1, 1, 2, 3)),
               g.tensor(np.float32, (1, 9, 2, 3)))
    p = g.symint()
    g.op("sym_size.int", x, g.scalar(-1), p)
    o = g.tensor(np.float32, (1,))
    g.op(UPDATE, v, c, p, o)
    return g.build([x, v, c], [c])


@pytest.mark.parametrize("p", [6, 2, 0])
def test_sym_size_positions_a_cache_write(gpu, rng, p):
    graph, blob = sym_size_graph()
    if p != 6:      # the exported dims are upper bounds: a call with fewer columns
        graph = specialize(graph, graph.input_ids, [(1, p), (1, 1, 2, 3), (1, 9, 2, 3)])
    x = rng.standard_normal((1, p)).astype(np.float32)
    value = rng.standard_normal((1, 1, 2, 3)).astype(np.float32)
    cache = rng.standard_normal((1, 9, 2, 3)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x, value, cache])
    assert_close(ref, written(cache, value, p), exact=True, what="reference vs slices")
    assert_close(out, ref, exact=True, what=f"cache written at sym_size {p}")


def test_sym_size_folded_to_an_int_plans_nothing():
    g = GraphBuilder()
    x = g.tensor(np.float32, (3, 4))
    o = g.tensor(np.float32, (3, 4))
    g.op("sym_size.int", x, g.scalar(1), g.scalar(4))
    g.op("aten.clone.default", x, g.scalar(None), o)
    plan = lower(g.build([x], [o])[0])
    assert not any("sym_size" in k.name for k in plan.kernels)


def test_update_cache_refuses_a_static_start_past_the_cache():
    g = GraphBuilder()
    v, c = g.tensor(np.float32, (1, 3, 2, 5)), g.tensor(np.float32, (1, 7, 2, 5))
    o = g.tensor(np.float32, (1,))
    g.op(UPDATE, v, c, g.scalar(5), o)
    with pytest.raises(UnsupportedOpError, match="start_pos 5 puts 3 rows outside"):
        lower(g.build([v, c], [c, o])[0])
