"""Repeated elementwise ops computed once (planner/share.py) and sibling chains that read the
same value as one multi-output dispatch (planner/fusion.py): fewer dispatches, bit-identical."""

from __future__ import annotations

import numpy as np

from harness import assert_close
from test_fusion import _quantize
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

SHAPE = (5, 12)   # 60 elements: 15 packed int8 words


def _cast(b, x, out):
    b.op("aten._to_copy.default", x, *[b.scalar(None)] * 4, b.scalar(False), b.scalar(None),
         out)


def _repeats():
    """Three projections' worth of quantize(x; 0.05, 3) -> f32 -> * c_i (c_i distinct), and a
    fourth quantize with another zero point, which must stay its own."""
    b = GraphBuilder()
    x = b.tensor(np.float32, SHAPE)
    outs = []
    for i, zp in enumerate((3, 3, 3, -2)):
        q, f, m = b.tensor(np.int8, SHAPE), b.tensor(np.float32, SHAPE), b.tensor(np.float32,
                                                                                  SHAPE)
        _quantize(b, x, 0.05, zp, -128, 127, q)
        _cast(b, q, f)
        b.op("aten.mul.Tensor", f, b.constant(np.array(0.5 + i, np.float32)), m)
        outs.append(m)
    return b.build([x], outs)


def _bitwise(g, blob, inputs):
    outs = []
    for plan in (lower(g), lower(g, fuse=False)):
        ex = Executor(plan, blob)
        ex.poison()
        outs.append(ex.run(inputs))
    env = run_reference(g, dict(zip(g.input_ids, inputs, strict=True)), blob)
    for n, (a, b) in enumerate(zip(*outs, strict=True)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), \
            f"output {n}: fused differs from unfused"
        assert_close(a, env.get(g.output_ids[n]), exact=True, what=f"output {n} vs numpy")


def test_repeats_are_computed_once_and_siblings_share_a_dispatch():
    g, _ = _repeats()
    ops = [d.op for d in lower(g).dispatches]
    # quantize+cast once for zp 3 (three repeats), its three muls as one dispatch with three
    # outputs; zp -2's chain reads x too, so it joins the first dispatch.
    assert ops == ["fused:quantize+cast+quantize+cast+mul", "fused:mul+mul+mul"], ops
    assert len(lower(g, fuse=False).dispatches) == 12


def test_repeats_and_siblings_are_bitwise_unfused(gpu):
    g, blob = _repeats()
    x = (np.random.default_rng(7).standard_normal(SHAPE) * 4).astype(np.float32)
    x.flat[0] = 0.025   # a tie: exactly half a quantization step
    _bitwise(g, blob, [x])


def _late_input():
    """relu(x) and x + permute(y): the add also reads a value made after relu, so it cannot
    move into relu's dispatch."""
    b = GraphBuilder()
    x, y = b.tensor(np.float32, (4, 4)), b.tensor(np.float32, (4, 4))
    r, p, a, n = (b.tensor(np.float32, (4, 4)) for _ in range(4))
    b.op("aten.relu.default", x, r)
    b.op("aten.permute_copy.default", y, b.scalar((1, 0)), p)
    b.op("aten.add.Tensor", x, p, b.scalar(1), a)
    b.op("aten.neg.default", x, n)
    return b.build([x, y], [r, a, n])


def test_sibling_reading_a_later_value_stays_apart(gpu):
    g, blob = _late_input()
    ops = [d.op for d in lower(g).dispatches]
    assert ops[0] == "fused:relu+neg" and "aten.add.Tensor" in ops, ops
    rng = np.random.default_rng(3)
    _bitwise(g, blob, [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2)])


def _layer_views():
    """Each of three layers views the position weight m (1,) as (1, 1, 1, 1) and multiplies
    it by the row mask (one constant in the file, as the exporter stores the layers' equal
    masks), then by its own input: the decoder's sink weights."""
    b = GraphBuilder()
    m = b.tensor(np.float32, (1,))
    xs = [b.tensor(np.float32, (1, 4, 1, 1)) for _ in range(3)]
    mask = b.constant(np.array([1, 0, 0, 0], np.float32).reshape(1, 4, 1, 1))
    outs = []
    for x in xs:
        v, w, o = (b.tensor(np.float32, d) for d in ((1, 1, 1, 1), (1, 4, 1, 1), (1, 4, 1, 1)))
        b.op("aten.view_copy.default", m, b.scalar((1, 1, 1, 1)), v)
        b.op("aten.mul.Tensor", v, mask, w)
        b.op("aten.mul.Tensor", w, x, o)
        outs.append(o)
    return b.build([m] + xs, outs)


def test_views_of_one_value_are_one_value(gpu):
    """The three views are one value, so the three weight products are one: computed once."""
    g, blob = _layer_views()
    ops = [d.op for d in lower(g).dispatches]
    assert len(lower(g, fuse=False).dispatches) > len(ops), ops
    assert sum(op.count("mul") for op in ops) == 4, ops   # one weight product, three uses
    rng = np.random.default_rng(5)
    _bitwise(g, blob, [np.array([1.0], np.float32)]
             + [rng.standard_normal((1, 4, 1, 1)).astype(np.float32) for _ in range(3)])
