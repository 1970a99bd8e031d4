"""et_vk.linear_qcs4w.default: f32 activations x 4-bit per-channel symmetric weights.

Args: x f32 [..., K], W:C uint8 [N, K/2], scales:C f32 [N], out f32 [..., N].
W is the exporter's packing (`backends/vulkan/_passes/fuse_quantized_ops.py`): byte j of
row n is `(w[n, 2j] + 8) << 4 | (w[n, 2j + 1] + 8)`, the even k in the high nibble, with
w in [-8, 7]. The kernel reads W as its file bytes (four per u32 word) and unpacks the
nibbles in registers; nothing is repacked at load.

Arithmetic: acc[m, n] = sum_k x[m, k] * f32(w[n, k]) in f32, y = acc * scales[n]; the
numpy reference sums in float64 and rounds, as the f32 linear's does (matmul.py).
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit

__all__ = ["UNITS", "unpack_qcs4w"]

NAME = "et_vk.linear_qcs4w.default"
WORKGROUP = 64
ROWS = 4  # output rows per invocation: each W word unpacked once serves this many rows


def _shapes(A, call):
    """(x, w, scales, out, M, N, K, why-unsupported or None)."""
    x, w, scales, out = call.args
    tx, tw, to = A.tensor(x), A.tensor(w), A.tensor(out)
    why = None
    if len(tw.dims) != 2 or not tx.dims or not to.dims:
        why = f"needs x [..., K], W [N, K/2], got x {list(tx.dims)}, W {list(tw.dims)}"
        return x, w, scales, out, 0, 0, 0, why
    n, kh = tw.dims
    k = tx.dims[-1]
    m = tx.numel // k if k else 0
    if k != 2 * kh:
        why = f"x has K = {k}, W packs {2 * kh} (K must be even and match)"
    elif tuple(to.dims) != tuple(tx.dims[:-1]) + (n,):
        why = f"output {list(to.dims)} does not match x {list(tx.dims)} and N = {n}"
    elif A.tensor(scales).numel < n:
        why = f"scales {list(A.tensor(scales).dims)} has fewer than N = {n} entries"
    elif m == 0 or n == 0:
        why = f"empty linear (M = {m}, N = {n})"
    return x, w, scales, out, m, n, k, why


def lower(L, call) -> None:
    x, w, scales, out, m, n, k, why = _shapes(L.args, call)
    if why:
        raise L.unsupported(why)
    rm = min(m, ROWS)
    groups = (-(-n // WORKGROUP), -(-m // rm), 1)
    if max(groups) > 65535:
        raise L.unsupported(f"{groups} workgroups exceed 65535 per dimension")
    kern = L.kernel("quantized/linear_qcs4w", M=m, N=n, K=k, KH=k // 2, RM=rm,
                    aligned=(k // 2) % 4 == 0, workgroup=WORKGROUP)
    L.dispatch(kern, [L.buf(x), L.buf(w), L.buf(scales), L.buf(out)], groups)


def unpack_qcs4w(packed: np.ndarray) -> np.ndarray:
    """W (N, K) int8 in [-8, 7] from its packed bytes (N, K/2): even k in the high nibble."""
    b = packed.astype(np.int32)
    w = np.empty((b.shape[0], 2 * b.shape[1]), np.int8)
    w[:, 0::2] = (b >> 4) - 8
    w[:, 1::2] = (b & 15) - 8
    return w


def reference(R, call) -> None:
    x, w, scales, out, m, n, k, why = _shapes(R.args, call)
    if why:
        raise PlanError(f"{R.args.op_name}: {why}")
    acc = R.get(x).reshape(m, k).astype(np.float64) @ unpack_qcs4w(R.get(w)).T.astype(
        np.float64)
    y = acc.astype(np.float32) * R.get(scales).reshape(-1)[:n].astype(np.float32)
    R.set(out, y.reshape(R.args.tensor(out).dims))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "Tf Tq Tf Tf"})]
