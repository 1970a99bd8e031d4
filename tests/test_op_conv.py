"""aten.convolution.default, patch-embedding form: floor sizes, bias or none, bad forms."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.plan import lower
from webpte.pte.builder import GraphBuilder


def _graph(rng, xshape, out_ch, k, *, bias=True, stride=None, padding=(0, 0), dilation=(1, 1),
           transposed=False, output_padding=(0, 0), groups=1):
    n, c, h, w = xshape
    g = GraphBuilder()
    x = g.tensor(np.float32, xshape)
    w_arr = rng.standard_normal((out_ch, c, k, k)).astype(np.float32)
    b_arr = rng.standard_normal((out_ch,)).astype(np.float32) if bias else None
    wt = g.constant(w_arr)
    b = g.constant(b_arr) if bias else g.scalar(None)
    o = g.tensor(np.float32, (n, out_ch, h // k, w // k))
    g.op("aten.convolution.default", x, wt, b, g.scalar(stride or (k, k)), g.scalar(padding),
         g.scalar(dilation), g.scalar(transposed), g.scalar(output_padding), g.scalar(groups), o)
    graph, blob = g.build([x], [o])
    return graph, blob, w_arr, b_arr


def _conv_loops(x, w, b, k):
    # Independent formula: one dot product per output pixel, in float64.
    n, _, h, wd = x.shape
    out = np.zeros((n, w.shape[0], h // k, wd // k))
    for i in range(h // k):
        for j in range(wd // k):
            patch = x[:, :, i * k:(i + 1) * k, j * k:(j + 1) * k].astype(np.float64)
            out[:, :, i, j] = np.tensordot(patch, w.astype(np.float64), axes=([1, 2, 3],
                                                                              [1, 2, 3]))
    return out + (b[None, :, None, None] if b is not None else 0)


@pytest.mark.parametrize("xshape,out_ch,k,bias", [
    ((1, 3, 15, 20), 7, 5, True),      # floor: 15x20 -> 3x4 patches, K = 75
    ((1, 3, 64, 48), 33, 16, True),    # 16x16 patches (vec4 gathers), 12 patches
    ((2, 3, 15, 20), 7, 5, False),     # batch 2, no bias
    ((1, 2, 36, 34), 130, 4, True),    # many output channels (several m tiles), W % 4 != 0
    ((1, 1, 1, 1), 1, 1, True),        # size-1 everything
])
def test_conv_patch(gpu, rng, xshape, out_ch, k, bias):
    graph, blob, w, b = _graph(rng, xshape, out_ch, k, bias=bias)
    x = rng.standard_normal(xshape).astype(np.float32)
    (out,), (ref,) = run_graph_both(graph, blob, [x])
    assert_close(ref, _conv_loops(x, w, b, k).astype(np.float32), rel=1e-6,
                 what="reference vs loops")
    assert_close(out, ref, rel=1e-5, what="convolution")


@pytest.mark.parametrize("kwargs,message", [
    ({"stride": (2, 2)}, "stride"),
    ({"padding": (1, 1)}, "padding"),
    ({"dilation": (2, 2)}, "dilation"),
    ({"transposed": True}, "transposed"),
    ({"output_padding": (1, 0)}, "output_padding"),
    ({"groups": 3}, "groups=3"),
])
def test_other_forms_are_unsupported(rng, kwargs, message):
    graph, _, _, _ = _graph(rng, (1, 3, 8, 8), 3, 4, **kwargs)
    with pytest.raises(UnsupportedOpError, match=message):
        lower(graph)
