"""et_vk.apply_rotary_emb (Llama's pair-wise RoPE on q and k): GPU against the reference
and the reference against complex multiplication, the formula the op is defined by."""

import numpy as np
import pytest

from harness import assert_close, run_graph_both
from webpte.errors import UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

ROPE = "et_vk.apply_rotary_emb.default"


def rope_graph(qshape, kshape, fshape):
    b = GraphBuilder()
    xq, xk = b.tensor(np.float32, qshape), b.tensor(np.float32, kshape)
    cos, sin = b.tensor(np.float32, fshape), b.tensor(np.float32, fshape)
    qo, ko = b.tensor(np.float32, qshape), b.tensor(np.float32, kshape)
    b.op(ROPE, xq, xk, cos, sin, b.value_list([qo, ko]))
    return b.build([xq, xk, cos, sin], [qo, ko])


def complex_rope(x, angles):
    """x's (real, imag) pairs times exp(i * angle[s, pair]), in complex128."""
    s = x.shape[-3]
    z = x.astype(np.float64).reshape(x.shape[:-1] + (-1, 2))
    z = (z[..., 0] + 1j * z[..., 1]) * np.exp(1j * angles.reshape(s, 1, -1))
    return np.stack([z.real, z.imag], -1).reshape(x.shape)


CASES = [
    ((1, 1, 4, 32), (1, 1, 2, 32)),    # the exporter's pattern graph: decode, GQA
    ((2, 5, 3, 6), (2, 5, 1, 6)),      # D not a multiple of 4, batch 2
    ((1, 7, 1, 2), (1, 7, 1, 2)),      # one pair per row
    ((3, 2, 10), (3, 5, 10)),          # rank 3 ([S, H, D]), more k heads than q heads
    ((1, 13, 8, 64), (1, 13, 2, 64)),  # several workgroups
]


@pytest.mark.parametrize("qshape,kshape", CASES, ids=[str(c) for c in CASES])
def test_apply_rotary_emb(gpu, rng, qshape, kshape):
    s, d = qshape[-3], qshape[-1]
    g, blob = rope_graph(qshape, kshape, (s, d // 2))
    # Llama's table: angle[s, i] = s * theta ** (-2i / D); an offset keeps row 0 non-trivial.
    angles = (np.arange(s)[:, None] + 0.5) * 10000.0 ** (-2 * np.arange(d // 2) / d)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    xq = rng.standard_normal(qshape).astype(np.float32)
    xk = rng.standard_normal(kshape).astype(np.float32)
    outs, refs = run_graph_both(g, blob, [xq, xk, cos, sin])
    for x, out, ref, what in zip((xq, xk), outs, refs, ("q", "k"), strict=True):
        assert_close(ref, complex_rope(x, angles).astype(np.float32), rel=1e-6, atol=1e-6,
                     rtol=1e-5, what=f"reference {what} vs complex product")
        assert_close(out, ref, rel=1e-6, atol=1e-6, rtol=1e-5, what=f"apply_rotary_emb {what}")


@pytest.mark.parametrize("qshape,kshape,fshape,why", [
    ((1, 3, 2, 8), (1, 4, 2, 8), (3, 4), "same S"),
    ((1, 3, 2, 7), (1, 3, 2, 7), (3, 3), "even D"),
    ((1, 3, 2, 8), (1, 3, 2, 8), (3, 8), r"must both be \[3, 4\]"),
])
def test_apply_rotary_emb_refuses(qshape, kshape, fshape, why):
    g, _ = rope_graph(qshape, kshape, fshape)
    with pytest.raises(UnsupportedOpError, match=why):
        lower(g)
