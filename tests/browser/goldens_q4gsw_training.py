"""Page goldens of the 4-bit group-wise training ops (make_goldens.py collects GOLDENS):
et_vk.linear_q4gsw_backward and et_vk.q4gsw_requant at odd, prime sizes, run in the page
against the numpy reference."""

import numpy as np

from webpte.pte.builder import GraphBuilder


def _scales(rng, n, k, gs, negatives=False):
    """(G, N4) f32 group-wise scales, transposed, padded to 4 columns (NaN), two zero."""
    g, n4 = -(-k // gs), -(-n // 4) * 4
    s = np.full((g, n4), np.nan, np.float32)
    s[:, :n] = rng.random((g, n)) * 0.02 + 0.005
    if negatives:
        s[:, :n] *= rng.choice([-1, 1], (g, n))
    s[0, 1] = s[g - 1, n - 2] = 0
    return s


def _backward(rng):
    """d_out [2, 5, 37] through W [37, 45] (odd K: the last byte holds one weight) in groups
    of 8 (a short last group)."""
    n, k, gs = 37, 45, 8
    codes = rng.integers(0, 16, (n, k + 1)).astype(np.uint8)
    packed = (codes[:, 1::2] << 4) | codes[:, 0::2]
    b = GraphBuilder()
    d = b.tensor(np.float32, (2, 5, n))
    o = b.tensor(np.float32, (2, 5, k))
    b.op("et_vk.linear_q4gsw_backward.default", d, b.constant(packed),
         b.constant(_scales(rng, n, k, gs)), b.scalar(gs), o)
    return b.build([d], [o]), [rng.standard_normal((2, 5, n)).astype(np.float32)]


def _requant(rng):
    """latent [13, 37] at ties (x.5 * s), their one-ulp neighbours, the clamp ends and
    infinities -> uint8 [13, 19] (not whole words) in groups of 6."""
    n, k, gs = 13, 37, 6
    scales = _scales(rng, n, k, gs, negatives=True)
    s = scales[np.arange(k) // gs, :n].T
    lat = (rng.integers(-20, 21, (n, k)) / 2).astype(np.float32) * s
    pick = rng.random((n, k))
    lat = np.where(pick < 0.2, np.nextafter(lat, np.float32(np.inf)), lat)
    lat = np.where(pick > 0.8, np.nextafter(lat, np.float32(-np.inf)), lat)
    lat[0, :6] = [np.inf, -np.inf, 1e30, -1e30, 7.5 * s[0, 4], -8.5 * s[0, 5]]
    b = GraphBuilder()
    x = b.tensor(np.float32, (n, k))
    o = b.tensor(np.uint8, (n, (k + 1) // 2))
    b.op("et_vk.q4gsw_requant.default", x, b.constant(scales), b.scalar(gs), o)
    return b.build([x], [o]), [lat.astype(np.float32)]


GOLDENS = {"q4gsw_backward": _backward, "q4gsw_requant": _requant}
