"""aten.convolution.default and et_vk.conv_with_clamp.default: patch embeddings on the matmul,
every other form (1-D/2-D, stride, padding, dilation, groups, transposed) on the direct kernel."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

CONV = "aten.convolution.default"
CLAMP = "et_vk.conv_with_clamp.default"


def _out_size(size, k, s, p, d, transposed, op):
    if transposed:
        return (size - 1) * s - 2 * p + d * (k - 1) + op + 1
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _graph(rng, xshape, out_ch, kernel, *, bias=True, stride=None, padding=None, dilation=None,
           transposed=False, output_padding=None, groups=1, clamp=None, out_shape=None):
    rank = len(xshape) - 2
    ones, zeros = (1,) * rank, (0,) * rank
    stride = stride or ones
    padding = padding or zeros
    dilation = dilation or ones
    output_padding = output_padding or zeros
    n, c = xshape[:2]
    wshape = ((c, out_ch // groups) if transposed else (out_ch, c // groups)) + tuple(kernel)
    if out_shape is None:
        out_shape = (n, out_ch) + tuple(
            _out_size(xshape[2 + i], kernel[i], stride[i], padding[i], dilation[i], transposed,
                      output_padding[i]) for i in range(rank))
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    w_arr = rng.standard_normal(wshape).astype(np.float32)
    b_arr = rng.standard_normal((out_ch,)).astype(np.float32) if bias else None
    wt = g.constant(w_arr)
    b = g.constant(b_arr) if bias else g.scalar(None)
    o = g.tensor(np.float32, out_shape)
    args = [x, wt, b, g.scalar(tuple(stride)), g.scalar(tuple(padding)),
            g.scalar(tuple(dilation)), g.scalar(transposed), g.scalar(tuple(output_padding)),
            g.scalar(groups)]
    if clamp is None:
        g.op(CONV, *args, o)
    else:
        g.op(CLAMP, *args, g.scalar(clamp[0]), g.scalar(clamp[1]), o)
    graph, blob = g.build([x], [o])
    return graph, blob, w_arr, b_arr


def _conv_loops(x, w, b, stride, padding, dilation, groups, transposed, out_shape):
    """Independent float64 formula: scatter every input pixel (transposed) or gather every
    output pixel's window, channel group by channel group, in 2-D (1-D as H = 1)."""
    if x.ndim == 3:
        x, w = x[:, :, None, :], w[:, :, None, :]
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        out_shape = (*out_shape[:2], 1, out_shape[2])
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, ci, h, wd = x.shape
    out = np.zeros(out_shape)
    cig, cog = ci // groups, out_shape[1] // groups
    kh, kw = w.shape[2:]
    for gi in range(groups):
        xs = x[:, gi * cig:(gi + 1) * cig]
        for ky in range(kh):
            for kx in range(kw):
                if transposed:
                    wk = w[gi * cig:(gi + 1) * cig, :, ky, kx]           # (cig, cog)
                    contrib = np.einsum("nchw,co->nohw", xs, wk)
                    for iy in range(h):
                        oy = iy * stride[0] - padding[0] + ky * dilation[0]
                        if not 0 <= oy < out_shape[2]:
                            continue
                        for ix in range(wd):
                            ox = ix * stride[1] - padding[1] + kx * dilation[1]
                            if 0 <= ox < out_shape[3]:
                                out[:, gi * cog:(gi + 1) * cog, oy, ox] += contrib[:, :, iy, ix]
                else:
                    wk = w[gi * cog:(gi + 1) * cog, :, ky, kx]           # (cog, cig)
                    for oy in range(out_shape[2]):
                        iy = oy * stride[0] - padding[0] + ky * dilation[0]
                        if not 0 <= iy < h:
                            continue
                        for ox in range(out_shape[3]):
                            ix = ox * stride[1] - padding[1] + kx * dilation[1]
                            if 0 <= ix < wd:
                                out[:, gi * cog:(gi + 1) * cog, oy, ox] += xs[:, :, iy, ix] @ wk.T
    if b is not None:
        out += b[None, :, None, None]
    return out


def _check(rng, xshape, out_ch, kernel, rel=1e-5, **kw):
    graph, blob, w, b = _graph(rng, xshape, out_ch, kernel, **kw)
    x = rng.standard_normal(xshape).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    keys = ("stride", "padding", "dilation", "output_padding")
    rank = len(xshape) - 2
    geo = {k: kw.get(k) or ((0,) if "pad" in k else (1,)) * rank for k in keys}
    exact = _conv_loops(x, w, b, geo["stride"], geo["padding"], geo["dilation"],
                        kw.get("groups", 1), kw.get("transposed", False), ref.shape)
    exact = exact.reshape(ref.shape)
    if kw.get("clamp"):
        lo, hi = kw["clamp"]
        exact = np.clip(exact, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    assert_close(ref, exact.astype(np.float32), rel=1e-6, what="reference vs loops")
    assert_close(out, ref, rel=rel, what="convolution")
    return graph


@pytest.mark.parametrize("xshape,out_ch,k,bias", [
    ((1, 3, 15, 20), 7, 5, True),      # floor: 15x20 -> 3x4 patches, K = 75
    ((1, 3, 64, 48), 33, 16, True),    # 16x16 patches (vec4 gathers), 12 patches
    ((2, 3, 15, 20), 7, 5, False),     # batch 2, no bias
    ((1, 2, 36, 34), 130, 4, True),    # many output channels (several m tiles), W % 4 != 0
    ((1, 1, 1, 1), 1, 1, True),        # size-1 everything
])
def test_conv_patch(gpu, rng, xshape, out_ch, k, bias):
    graph = _check(rng, xshape, out_ch, (k, k), bias=bias, stride=(k, k))
    assert "matmul" in lower(graph).kernels[0].name


DIRECT_2D = [
    dict(xshape=(1, 5, 9, 11), out_ch=7, kernel=(3, 3), padding=(1, 1)),
    dict(xshape=(2, 3, 10, 13), out_ch=4, kernel=(3, 2), stride=(2, 3), padding=(1, 0),
         dilation=(2, 1)),                                             # every axis differs
    dict(xshape=(1, 8, 7, 7), out_ch=8, kernel=(3, 3), padding=(1, 1), groups=8),  # depthwise
    dict(xshape=(1, 6, 5, 9), out_ch=9, kernel=(3, 3), padding=(2, 1), groups=3, bias=False),
    dict(xshape=(1, 3, 4, 4), out_ch=2, kernel=(5, 5), padding=(2, 2)),  # kernel > input
    dict(xshape=(1, 1, 1, 1), out_ch=1, kernel=(1, 1), padding=(1, 0)),  # size 1, pad rows
    dict(xshape=(1, 4, 4, 5), out_ch=6, kernel=(2, 2), stride=(2, 2), transposed=True),
    dict(xshape=(1, 4, 5, 3), out_ch=6, kernel=(3, 4), stride=(2, 3), padding=(1, 2),
         dilation=(1, 2), output_padding=(1, 0), groups=2, transposed=True),
    dict(xshape=(1, 3, 70, 50), out_ch=5, kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
]


@pytest.mark.parametrize("case", DIRECT_2D, ids=lambda c: f"{c['xshape']}-{c['kernel']}")
def test_conv2d_direct(gpu, rng, case):
    case = dict(case)
    graph = _check(rng, case.pop("xshape"), case.pop("out_ch"), case.pop("kernel"), **case)
    assert lower(graph).kernels[0].name.startswith("conv_")


@pytest.mark.parametrize("case", [
    dict(xshape=(1, 4, 5), out_ch=6, kernel=(1,)),                     # pointwise: matmul
    dict(xshape=(2, 3, 9), out_ch=4, kernel=(3,), stride=(2,), padding=(1,)),
    dict(xshape=(1, 2, 11), out_ch=3, kernel=(3,), padding=(2,), dilation=(2,)),
    dict(xshape=(1, 5, 7), out_ch=5, kernel=(5,), groups=5, bias=False),  # depthwise
    dict(xshape=(1, 3, 6), out_ch=2, kernel=(4,), stride=(2,), padding=(1,), transposed=True),
], ids=lambda c: f"{c['xshape']}-{c['kernel']}")
def test_conv1d(gpu, rng, case):
    case = dict(case)
    _check(rng, case.pop("xshape"), case.pop("out_ch"), case.pop("kernel"), **case)


@pytest.mark.parametrize("clamp", [(0, 6), (-0.5, None), (None, 0.25), (0.0, 6.0)])
def test_conv_with_clamp(gpu, rng, clamp):
    # A patch-shaped conv with a clamp runs on the direct kernel too.
    _check(rng, (1, 3, 7, 9), 5, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1),
           clamp=clamp)
    _check(rng, (1, 2, 6, 6), 3, (2, 2), stride=(2, 2), clamp=clamp)


def test_direct_reference_order_is_the_kernels():
    """No GPU: the direct reference sums taps one by one in float32, (channel, ky, kx) order:
    1e8 + 1 - 1e8 + 1 is 1 that way (the exact sum is 2)."""
    from webpte.kernels.conv.conv import ConvGeometry, _direct
    x = np.array([1e8, 1, -1e8, 1], np.float32).reshape(1, 2, 1, 2)
    w = np.ones((1, 2, 1, 2), np.float32)
    g = ConvGeometry(1, 2, 1, 2, 1, 1, 2, 1, 1, (1, 1), (0, 0), (1, 1), 1, False)
    assert _direct(x, w, g).item() == 1.0


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(out_shape=(1, 3, 5, 5)), UnsupportedOpError, "does not match"),
    (dict(groups=2), UnsupportedOpError, "groups=2"),
    (dict(output_padding=(1, 1)), UnsupportedOpError, "output_padding"),
    (dict(clamp=(6, 0)), UnsupportedOpError, "empty"),
])
def test_bad_forms_are_typed_errors(rng, kwargs, error, message):
    graph, _, _, _ = _graph(rng, (1, 3, 8, 8), 3, (3, 3), **kwargs)
    with pytest.raises(error, match=message):
        lower(graph)


def test_conv3d_is_unsupported_and_int_input_is_a_plan_error(rng):
    g = GraphBuilder()
    x = g.tensor(np.float32, (1, 1, 2, 2, 2))
    w = g.constant(np.ones((1, 1, 1, 1, 1), np.float32))
    o = g.tensor(np.float32, (1, 1, 2, 2, 2))
    g.op(CONV, x, w, g.scalar(None), *[g.scalar(v) for v in ((1,), (0,), (1,), False, (0,), 1)],
         o)
    with pytest.raises(UnsupportedOpError, match="1-D and 2-D"):
        lower(g.build([x], [o])[0])
    g = GraphBuilder()
    x = g.tensor(np.int32, (1, 1, 4))
    w = g.constant(np.ones((1, 1, 1), np.float32))
    o = g.tensor(np.float32, (1, 1, 4))
    g.op(CONV, x, w, g.scalar(None), *[g.scalar(v) for v in ((1,), (0,), (1,), False, (0,), 1)],
         o)
    with pytest.raises(PlanError, match="float32"):
        lower(g.build([x], [o])[0])
