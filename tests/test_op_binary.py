"""aten.add/sub/mul.Tensor: broadcasting, 0-d operands, alpha, int outputs."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.pte.builder import GraphBuilder

CASES = [
    ("aten.add.Tensor", (3, 7, 5), (3, 7, 5), 1),
    ("aten.add.Tensor", (2, 1, 13), (9, 1), 1),      # both sides broadcast
    ("aten.sub.Tensor", (1, 5, 33), (), 1),           # 0-d operand
    ("aten.sub.Tensor", (7, 3), (7, 3), 2.5),         # alpha
    ("aten.mul.Tensor", (4, 1, 3, 5), (1, 6, 1, 5), None),
    ("aten.mul.Tensor", (1,), (1,), None),
    ("aten.add.Tensor", (300, 259), (259,), 1),       # > one workgroup, odd
]


def _graph(name, sa, sb, alpha, out_dtype=np.float32, in_dtype=np.float32):
    b = GraphBuilder()
    x, y = b.tensor(in_dtype, sa), b.tensor(in_dtype, sb)
    out_shape = np.broadcast_shapes(sa, sb)
    o = b.tensor(out_dtype, out_shape)
    if alpha is None:
        b.op(name, x, y, o)
    else:
        b.op(name, x, y, b.scalar(alpha), o)
    return b.build([x, y], [o])


@pytest.mark.parametrize("name,sa,sb,alpha", CASES)
def test_binary_f32(gpu, rng, name, sa, sb, alpha):
    g, blob = _graph(name, sa, sb, alpha)
    xs = [rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    expect = {"aten.add.Tensor": lambda a, b: a + (alpha or 1) * b,
              "aten.sub.Tensor": lambda a, b: a - (alpha or 1) * b,
              "aten.mul.Tensor": lambda a, b: a * b}[name](*xs)
    assert_close(ref, expect.astype(np.float32), rel=1e-6, what="reference vs numpy")
    assert_close(out, ref, rel=1e-5, what=name)


def test_binary_int32_exact(gpu, rng):
    g, blob = _graph("aten.mul.Tensor", (5, 3), (3,), None, np.int32, np.int32)
    xs = [rng.integers(-1000, 1000, (5, 3)).astype(np.int32),
          rng.integers(-1000, 1000, (3,)).astype(np.int32)]
    (out,), (ref,) = run_graph_both(g, blob, xs)
    assert_close(out, ref, exact=True)
    assert_close(ref, xs[0] * xs[1], exact=True)


def test_binary_with_constant_operand(gpu, rng):
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 11))
    w = b.constant(rng.standard_normal((11,)).astype(np.float32))
    o = b.tensor(np.float32, (3, 11))
    b.op("aten.add.Tensor", x, w, b.scalar(1), o)
    g, blob = b.build([x], [o])
    xv = rng.standard_normal((3, 11)).astype(np.float32)
    (out,), (ref,) = run_graph_both(g, blob, [xv])
    assert_close(out, ref, rel=1e-6)
