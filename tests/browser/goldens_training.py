"""Page goldens of the training ops (make_goldens.py collects GOLDENS): et_vk.fused_ce,
et_vk.linear_dW and et_vk.adamw_step at odd, prime sizes, run in the page against the numpy
reference."""

import numpy as np

from webpte.pte.builder import GraphBuilder


def _fused_ce(rng):
    """logits [11, 293] (past one workgroup's first pass) shifted by 40, int32 labels with
    three rows masked; n_valid 8."""
    n, v = 11, 293
    labels = rng.integers(0, v, n).astype(np.int32)
    labels[[1, 4, 9]] = [-100, -1, -100]
    b = GraphBuilder()
    x, y = b.tensor(np.float32, (n, v)), b.tensor(np.int32, (n,))
    loss, grad = b.tensor(np.float32, ()), b.tensor(np.float32, (n, v))
    b.op("et_vk.fused_ce.default", x, y, b.scalar(8.0), b.value_list([loss, grad]))
    logits = (rng.standard_normal((n, v)) * 2 + 40).astype(np.float32)
    return b.build([x, y], [loss, grad]), [logits, labels]


def _linear_dw(rng):
    """d_out [3, 7, 37] and x [21, 29] (leading dims differ, 21 rows each) -> d_W [37, 29]."""
    b = GraphBuilder()
    d, x = b.tensor(np.float32, (3, 7, 37)), b.tensor(np.float32, (21, 29))
    o = b.tensor(np.float32, (37, 29))
    b.op("et_vk.linear_dW.default", d, x, o)
    return b.build([d, x], [o]), [rng.standard_normal((3, 7, 37)).astype(np.float32),
                                  rng.standard_normal((21, 29)).astype(np.float32)]


def _adamw_step(rng):
    """Two steps (t = 1, 2) on param, m, v [13, 7] in one graph, a read of param between."""
    dims, lr, b1, b2, wd = (13, 7), 1e-3, 0.9, 0.999, 0.01
    b = GraphBuilder()
    param, m, v, g1, g2 = (b.tensor(np.float32, dims) for _ in range(5))
    half, mid = b.tensor(np.float32, (1,)), b.tensor(np.float32, dims)
    outs = []
    for step, g in ((1, g1), (2, g2)):
        outs = [b.tensor(np.float32, dims) for _ in range(3)]
        b.op("et_vk.adamw_step.default", param, m, v, g, *(b.scalar(s) for s in (
            lr, b1, b2, 1e-8, wd, 1 - b1 ** step, 1 - b2 ** step)), b.value_list(outs))
        if step == 1:
            b.op("aten.mul.Tensor", param, half, mid)
    inputs = [rng.standard_normal(dims).astype(np.float32),
              (rng.standard_normal(dims) * 0.1).astype(np.float32),
              (rng.random(dims) * 0.01).astype(np.float32),
              rng.standard_normal(dims).astype(np.float32),
              rng.standard_normal(dims).astype(np.float32), np.array([0.5], np.float32)]
    return b.build([param, m, v, g1, g2, half], [mid, *outs]), inputs


GOLDENS = {"training_fused_ce": _fused_ce, "training_linear_dw": _linear_dw,
           "training_adamw_step": _adamw_step}
