"""Training ops: et_vk.linear_dW (weight gradient), et_vk.fused_ce (cross-entropy loss and
its logits gradient) and et_vk.adamw_step (an AdamW step written in place). GPU against the
reference, and the reference against float64 formulas written from ExecuTorch's Python
definitions (`backends/vulkan/custom_ops_lib.py`)."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

DW = "et_vk.linear_dW.default"
CE = "et_vk.fused_ce.default"
ADAMW = "et_vk.adamw_step.default"


# -- linear_dW -----------------------------------------------------------------------------

def dw_graph(lead_d, lead_x, n, k):
    b = GraphBuilder()
    d, x = b.tensor(np.float32, lead_d + (n,)), b.tensor(np.float32, lead_x + (k,))
    o = b.tensor(np.float32, (n, k))
    b.op(DW, d, x, o)
    return b.build([d, x], [o])


DWS = [
    ((5,), (5,), 7, 3),            # a partial block both ways
    ((2, 3), (6,), 13, 17),        # leading dims differ, the row count agrees
    ((1,), (1,), 1, 1),            # size-1 everything
    ((1, 1, 4), (4,), 4, 4),       # one whole block
    ((97,), (97,), 5, 29),         # prime M and K
    ((3, 11), (33,), 37, 2),       # prime N, K below a block
]


@pytest.mark.parametrize("lead_d,lead_x,n,k", DWS, ids=[str(c) for c in DWS])
def test_linear_dw(gpu, rng, lead_d, lead_x, n, k):
    graph, blob = dw_graph(lead_d, lead_x, n, k)
    d = rng.standard_normal(lead_d + (n,)).astype(np.float32)
    x = rng.standard_normal(lead_x + (k,)).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [d, x])
    expect = d.reshape(-1, n).astype(np.float64).T @ x.reshape(-1, k).astype(np.float64)
    assert_close(ref, expect.astype(np.float32), rel=1e-7, atol=1e-6, rtol=1e-6,
                 what="reference vs d_out^T @ x")
    assert_close(out, ref, rel=1e-6, atol=1e-5, rtol=1e-5, what="linear_dW")


@pytest.mark.parametrize("lead_d,lead_x,n,k,dims,why", [
    ((4,), (5,), 3, 2, (3, 2), "row counts must match"),
    ((4,), (4,), 3, 2, (2, 3), "are not d_out"),
    ((4,), (4,), 3, 2, (3, 2, 1), "are not d_out"),
    ((0,), (0,), 3, 2, (3, 2), "empty"),
])
def test_linear_dw_refused(lead_d, lead_x, n, k, dims, why):
    b = GraphBuilder()
    d, x = b.tensor(np.float32, lead_d + (n,)), b.tensor(np.float32, lead_x + (k,))
    o = b.tensor(np.float32, dims)
    b.op(DW, d, x, o)
    graph, _ = b.build([d, x], [o])
    with pytest.raises(UnsupportedOpError, match=why):
        lower(graph)


# -- fused_ce ------------------------------------------------------------------------------

def ce_graph(n, v, n_valid, label_dtype=np.int32, loss_dims=()):
    b = GraphBuilder()
    x, y = b.tensor(np.float32, (n, v)), b.tensor(label_dtype, (n,))
    loss, grad = b.tensor(np.float32, loss_dims), b.tensor(np.float32, (n, v))
    b.op(CE, x, y, b.scalar(float(n_valid)), b.value_list([loss, grad]))
    return b.build([x, y], [loss, grad])


def ce_float64(logits, labels, n_valid):
    """ExecuTorch's definition in float64: masked rows give nothing."""
    x = logits.astype(np.float64)
    n, v = x.shape
    mask = labels >= 0
    safe = np.clip(labels, 0, None)
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    picked = x[np.arange(n), safe]
    loss = np.where(mask, (lse - picked) / n_valid, 0.0).sum()
    soft = np.exp(x - lse[:, None])
    onehot = np.eye(v)[safe]
    return loss, np.where(mask[:, None], (soft - onehot) / n_valid, 0.0)


CES = [
    (7, 13, 0.3, np.int32),        # odd sizes, some rows masked
    (1, 1, 0.0, np.int32),         # one class: loss 0, gradient 0
    (5, 1000, 0.2, np.int64),      # rows longer than a workgroup's first pass, int64 labels
    (3, 257, 0.0, np.int32),       # a workgroup and one over
    (300, 5, 0.5, np.int32),       # more rows than a loss-sum workgroup
    (2, 2, 0.0, np.int64),
]


@pytest.mark.parametrize("n,v,masked,label_dtype", CES, ids=[str(c[:3]) for c in CES])
def test_fused_ce(gpu, rng, n, v, masked, label_dtype):
    logits = (rng.standard_normal((n, v)) * 3 + 50).astype(np.float32)   # large: max-shift
    labels = rng.integers(0, v, n)
    labels[rng.random(n) < masked] = -100
    n_valid = max(1, int((labels >= 0).sum()))
    graph, blob = ce_graph(n, v, n_valid, label_dtype)
    (loss, grad), (rloss, rgrad) = run_graph_both(graph, blob,
                                                  [logits, labels.astype(label_dtype)])
    e_loss, e_grad = ce_float64(logits, labels, n_valid)
    assert_close(rloss, np.float32(e_loss), rel=1e-5, atol=1e-5, what="reference loss")
    assert_close(rgrad, e_grad.astype(np.float32), rel=1e-5, atol=1e-6, what="reference grad")
    assert_close(loss, rloss, rel=1e-5, atol=1e-5, what="fused_ce loss")
    assert_close(grad, rgrad, rel=1e-5, atol=1e-6, what="fused_ce dlogits")


def test_fused_ce_masks_and_counts(gpu, rng):
    """Every row masked: loss 0 and zero gradients whatever n_valid; n_valid is the caller's
    count (not the unmasked rows'); a label >= V makes its row and the loss NaN."""
    n, v = 6, 11
    logits = rng.standard_normal((n, v)).astype(np.float32)
    graph, blob = ce_graph(n, v, 1.0, loss_dims=(1,))
    (loss, grad), _ = run_graph_both(graph, blob, [logits, np.full(n, -1, np.int32)])
    assert loss.tolist() == [0.0] and not grad.any()

    labels = np.array([3, -1, 0, 10, -7, 5])
    graph, blob = ce_graph(n, v, 2.5)
    (loss, grad), (rloss, rgrad) = run_graph_both(graph, blob, [logits, labels.astype(np.int32)])
    e_loss, e_grad = ce_float64(logits, labels, 2.5)
    assert_close(rloss, np.float32(e_loss), rel=1e-6, atol=1e-6, what="reference loss")
    assert_close(loss, rloss, rel=1e-6, atol=1e-6, what="loss with n_valid 2.5")
    assert_close(grad, e_grad.astype(np.float32), rel=1e-6, atol=1e-6, what="dlogits")

    labels[3] = v
    (loss, grad), (rloss, rgrad) = run_graph_both(graph, blob, [logits, labels.astype(np.int32)])
    assert np.isnan(loss) and np.isnan(rloss)
    assert np.isnan(grad[3]).all() and np.isnan(rgrad[3]).all()
    rest = [0, 1, 2, 4, 5]
    assert_close(grad[rest], e_grad[rest].astype(np.float32), rel=1e-6, atol=1e-6,
                 what="other rows")


@pytest.mark.parametrize("dims,n_valid,labels,loss_dims,why", [
    ((2, 3, 4), 1.0, (2,), (), "only non-empty 2-D"),
    ((2, 3), 0.0, (2,), (), "n_valid 0.0"),
    ((2, 3), 1.0, (3,), (), "one label per row"),
    ((2, 3), 1.0, (2,), (2,), "only one element"),
])
def test_fused_ce_refused(dims, n_valid, labels, loss_dims, why):
    b = GraphBuilder()
    x, y = b.tensor(np.float32, dims), b.tensor(np.int32, labels)
    loss, grad = b.tensor(np.float32, loss_dims), b.tensor(np.float32, dims)
    b.op(CE, x, y, b.scalar(n_valid), b.value_list([loss, grad]))
    graph, _ = b.build([x, y], [loss, grad])
    with pytest.raises(UnsupportedOpError, match=why):
        lower(graph)


# -- adamw_step ----------------------------------------------------------------------------

LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8


def adamw_float64(param, m, v, grad, wd, step):
    """ExecuTorch's definition in float64 (bias corrections 1 - beta^step)."""
    p, m, v, g = (a.astype(np.float64) for a in (param, m, v, grad))
    p = p * (1 - LR * wd)
    m = m * BETA1 + (1 - BETA1) * g
    v = v * BETA2 + (1 - BETA2) * g * g
    p = p - LR * (m / (1 - BETA1 ** step)) / (np.sqrt(v / (1 - BETA2 ** step)) + EPS)
    return p, m, v


def adamw_call(b, param, m, v, grad, wd, step, dims):
    outs = [b.tensor(np.float32, dims) for _ in range(3)]
    b.op(ADAMW, param, m, v, grad, *(b.scalar(float(s)) for s in (
        LR, BETA1, BETA2, EPS, wd, 1 - BETA1 ** step, 1 - BETA2 ** step)), b.value_list(outs))
    return outs


def adamw_state(rng, dims):
    return (rng.standard_normal(dims).astype(np.float32),
            (rng.standard_normal(dims) * 0.1).astype(np.float32),
            (rng.random(dims) * 0.01).astype(np.float32))


@pytest.mark.parametrize("dims,wd,step", [((7,), 0.01, 1), ((3, 5), 0.0, 10), ((1,), 0.1, 3),
                                          ((997,), 0.01, 2), ((2, 1, 13), 0.05, 1)])
def test_adamw_step(gpu, rng, dims, wd, step):
    b = GraphBuilder()
    param, m, v, grad = (b.tensor(np.float32, dims) for _ in range(4))
    outs = adamw_call(b, param, m, v, grad, wd, step, dims)
    graph, blob = b.build([param, m, v, grad], outs)
    state = adamw_state(rng, dims)
    g = rng.standard_normal(dims).astype(np.float32)
    out, ref = run_graph_both(graph, blob, [*state, g])
    for name, o, r, e in zip("pmv", out, ref, adamw_float64(*state, g, wd, step), strict=True):
        assert_close(r, e.astype(np.float32), rel=1e-6, atol=1e-7, rtol=1e-5,
                     what=f"reference {name} vs float64")
        assert_close(o, r, rel=1e-6, atol=1e-7, rtol=1e-5, what=f"adamw_step {name}")


def test_adamw_two_steps_in_place(gpu, rng):
    """Two steps on the same param, m, v in one graph: each reads what the one before wrote;
    ops that read param before and after a step (the same op twice) see the old and the new
    values; calls are independent (inputs are not changed by a run)."""
    dims = (5, 7)
    b = GraphBuilder()
    param, m, v, g1, g2 = (b.tensor(np.float32, dims) for _ in range(5))
    two = b.tensor(np.float32, (1,))
    before, after = b.tensor(np.float32, dims), b.tensor(np.float32, dims)
    b.op("aten.mul.Tensor", param, two, before)
    adamw_call(b, param, m, v, g1, 0.01, 1, dims)
    b.op("aten.mul.Tensor", param, two, after)
    outs = adamw_call(b, param, m, v, g2, 0.01, 2, dims)
    graph, blob = b.build([param, m, v, g1, g2, two], [before, after, *outs])
    state = adamw_state(rng, dims)
    grads = [rng.standard_normal(dims).astype(np.float32) for _ in range(2)]
    inputs = [*state, *grads, np.array([2], np.float32)]
    out, ref = run_graph_both(graph, blob, inputs)
    s1 = adamw_float64(*state, grads[0], 0.01, 1)
    s2 = adamw_float64(*s1, grads[1], 0.01, 2)
    expect = [2 * state[0], 2 * s1[0], *s2]
    for name, o, r, e in zip(["before", "after", "p", "m", "v"], out, ref, expect, strict=True):
        assert_close(r, e.astype(np.float32), rel=1e-6, atol=1e-7, rtol=1e-5,
                     what=f"reference {name} vs float64")
        assert_close(o, r, rel=1e-6, atol=1e-7, rtol=1e-5, what=f"two steps: {name}")
    ex = Executor(lower(graph), blob)
    first, again = ex.run(inputs), ex.run(inputs)
    for a, c in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, c)


def test_adamw_prepacked_state(gpu, rng):
    """m and v prepacked from zero constants (an exported optimizer's moments): state of
    their own, zero at load, carried from one call to the next."""
    dims = (9,)
    b = GraphBuilder()
    param, grad = b.tensor(np.float32, dims), b.tensor(np.float32, dims)
    m, v = b.tensor(np.float32, dims), b.tensor(np.float32, dims)
    for vid in (m, v):
        b.op("et_vk.prepack.default", b.constant(np.zeros(dims, np.float32)), vid)
    outs = adamw_call(b, param, m, v, grad, 0.0, 1, dims)
    graph, blob = b.build([param, grad], outs)
    p0 = rng.standard_normal(dims).astype(np.float32)
    grads = [rng.standard_normal(dims).astype(np.float32) for _ in range(2)]
    ex, state = Executor(lower(graph), blob), {}
    z = np.zeros(dims, np.float32)
    expect = (p0, z, z)
    for g in grads:
        out = ex.run([p0, g])
        env = run_reference(graph, dict(zip(graph.input_ids, [p0, g], strict=True)), blob,
                            state)
        ref = [env.get(o) for o in outs]
        expect = adamw_float64(p0, expect[1], expect[2], g, 0.0, 1)
        for name, o, r, e in zip("pmv", out, ref, expect, strict=True):
            assert_close(r, e.astype(np.float32), rel=1e-6, atol=1e-7, rtol=1e-5,
                         what=f"reference {name}")
            assert_close(o, r, rel=1e-6, atol=1e-7, rtol=1e-5, what=f"state {name}")


@pytest.mark.parametrize("case,why", [
    ("numel", "same non-zero element count"),
    ("constant", "param is a constant"),
    ("same", "four distinct values"),
    ("bc", "bias correction of 0"),
])
def test_adamw_refused(case, why):
    b = GraphBuilder()
    dims = (4,)
    param, m, v = (b.tensor(np.float32, dims) for _ in range(3))
    grad = b.tensor(np.float32, (5,) if case == "numel" else dims)
    if case == "constant":
        param = b.constant(np.ones(dims, np.float32))
    if case == "same":
        v = m
    outs = [b.tensor(np.float32, dims) for _ in range(3)]
    b.op(ADAMW, param, m, v, grad, *(b.scalar(s) for s in (
        LR, BETA1, BETA2, EPS, 0.01, 0.1, 0.0 if case == "bc" else 0.001)), b.value_list(outs))
    inputs = [m, grad] + ([] if case == "same" else [v]) + ([] if case == "constant" else [param])
    graph, _ = b.build(inputs, outs)
    with pytest.raises(UnsupportedOpError, match=why):
        lower(graph)


def test_adamw_graph_outputs_are_the_written_inputs(gpu, rng):
    """A graph returning param, m and v themselves (the form export leaves once the op is
    no longer functionalized) returns the values the step wrote."""
    dims = (6, 5)
    b = GraphBuilder()
    param, m, v, grad = (b.tensor(np.float32, dims) for _ in range(4))
    adamw_call(b, param, m, v, grad, 0.02, 4, dims)
    graph, blob = b.build([param, m, v, grad], [param, m, v])
    state, g = adamw_state(rng, dims), rng.standard_normal(dims).astype(np.float32)
    out, ref = run_graph_both(graph, blob, [*state, g])
    for name, o, r, e in zip("pmv", out, ref, adamw_float64(*state, g, 0.02, 4), strict=True):
        assert_close(r, e.astype(np.float32), rel=1e-6, atol=1e-7, rtol=1e-5,
                     what=f"reference {name}")
        assert_close(o, r, rel=1e-6, atol=1e-7, rtol=1e-5, what=f"written input {name}")


@pytest.mark.parametrize("form", ["read", "output"])
def test_adamw_refuses_reading_a_returned_tensor_after_a_later_step(rng, form):
    """In ExecuTorch a step's returned tensors are its written ones (`Tensor(a!)`), so after a
    later step on the same param they hold the later values; webpte cannot promise that (a
    prepacked param's returned tensor is a copy), so a graph that reads one then, or returns
    it, is refused by both the planner and the interpreter. Chaining steps through the returned
    tensors is fine."""
    dims = (4, 3)
    b = GraphBuilder()
    param, m, v, g1, g2 = (b.tensor(np.float32, dims) for _ in range(5))
    two = b.tensor(np.float32, (1,))
    first = adamw_call(b, param, m, v, g1, 0.01, 1, dims)
    second = adamw_call(b, *first, g2, 0.01, 2, dims)
    ok, ok_blob = b.build([param, m, v, g1, g2], second)
    state = adamw_state(rng, dims)
    grads = [rng.standard_normal(dims).astype(np.float32) for _ in range(2)]
    out, ref = run_graph_both(ok, ok_blob, [*state, *grads])
    s2 = adamw_float64(*adamw_float64(*state, grads[0], 0.01, 1), grads[1], 0.01, 2)
    for name, o, r, e in zip("pmv", out, ref, s2, strict=True):
        assert_close(r, e.astype(np.float32), rel=1e-6, atol=1e-7, rtol=1e-5, what=name)
        assert_close(o, r, rel=1e-6, atol=1e-7, rtol=1e-5, what=f"chained {name}")
    outputs = list(second)
    if form == "read":
        late = b.tensor(np.float32, dims)
        b.op("aten.mul.Tensor", first[0], two, late)
        outputs.append(late)
    else:
        outputs.append(first[1])
    graph, blob = b.build([param, m, v, g1, g2, two], outputs)
    inputs = dict(zip(graph.input_ids, [*state, *grads, np.ones(1, np.float32)], strict=True))
    with pytest.raises(UnsupportedOpError, match="after a later step|written in place again"):
        lower(graph)
    with pytest.raises(UnsupportedOpError, match="after a later step|written in place again"):
        run_reference(graph, inputs, blob)
