"""et_vk.grid_priors.default: detection anchor centres of an [..., H, W] feature map.

out[i * W + j] = ((j + offset) * stride, (i + offset) * stride) in f32 (x first); only the
input's last two sizes are read, never its values.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit
from .resample import f32

OP = "et_vk.grid_priors.default"
WORKGROUP = 64


def _parse(A, call) -> tuple[int, int, int, int, float]:
    """(out, height, width, stride, offset)."""
    x, stride_id, offset_id, out = call.args
    dx, do = tuple(A.tensor(x).dims), tuple(A.tensor(out).dims)
    if len(dx) < 2 or do != (dx[-2] * dx[-1], 2):
        raise A.unsupported(call, f"output {list(do)} should be [H*W, 2] for input {list(dx)}")
    # torch adds the offset to a float32 arange: it is an f32 there.
    return out, dx[-2], dx[-1], A.int(stride_id), f32(A.float(offset_id))


def lower(L, call) -> None:
    out, h, w, stride, offset = _parse(L.args, call)
    if h * w == 0:
        raise L.unsupported("an empty feature map has no priors")
    wg, row = L.grid(h * w, WORKGROUP)
    k = L.kernel("conv/grid_priors", h=h, w=w, workgroup=WORKGROUP, row=row)
    # stride and offset are runtime words: every detection head shares one pipeline.
    L.dispatch(k, [L.params(float(stride), offset), L.buf(out)], wg)


def reference(R, call) -> None:
    out, h, w, stride, offset = _parse(R.args, call)
    f = np.float32
    ys, xs = np.meshgrid(np.arange(h, dtype=f), np.arange(w, dtype=f), indexing="ij")
    pts = np.stack([xs.ravel(), ys.ravel()], axis=-1)
    R.set(out, (pts + f(offset)) * f(stride))


UNITS = [OpUnit((OP,), lower, reference, {OP: "Tf i f Tf"})]
