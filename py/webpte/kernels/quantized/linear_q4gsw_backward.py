"""et_vk.linear_q4gsw_backward.default: the input gradient of et_vk.linear_q4gsw through its
frozen 4-bit group-wise weights (LoRA training over a quantized base).

Args: d_out f32 [..., N], W uint8 [N, Kb] (linear_q4gsw's packing: byte j of row n is
`(w[n, 2j+1] + 8) << 4 | (w[n, 2j] + 8)`, the even k in the low nibble, w in [-8, 7]),
weight_scales f32 [G, >= N] (G >= ceil(K / group_size), transposed as the forward reads
them), group_size Int, d_x f32 [..., K] with the leading dims of d_out. Semantics
(ExecuTorch `backends/vulkan/custom_ops_lib.py` `linear_q4gsw_backward_impl`, which
dequantizes W through the forward, and its WebGPU kernel):

    d_x[m, k] = sum_n d_out[m, n] * w[n, k] * scales[k // group_size, n]

ExecuTorch's definition gives d_x 2 * Kb columns; its WebGPU kernel also takes K = 2 * Kb - 1
(the last byte holding one weight), so K must satisfy Kb == ceil(K / 2): a W row padded
further would give d_x columns the graph does not have, and is refused. Group sizes need
not divide K (the last group is short).

The kernel forms each dequantized weight `f32(w) * scale` in f32 and sums the products over
n in order in f32; the numpy reference forms the same f32 weights and sums in float64,
rounded to f32 once.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit
from .linear_q4 import group_scales, unpack_q4gsw

__all__ = ["UNITS", "q4gsw_backward_reference"]

_NAME = "et_vk.linear_q4gsw_backward.default"
WORKGROUP = 64
ROWS = 4  # d_x rows per invocation: each weight unpacked once serves this many rows


def _parse(A, call) -> dict:
    """Geometry of the call; raises UnsupportedOpError for forms not handled."""
    dout, w, scales, gs_id, dx = call.args
    gs = A.int(gs_id)
    to, tw, ts, tx = A.tensor(dout), A.tensor(w), A.tensor(scales), A.tensor(dx)
    if len(tw.dims) != 2 or not to.dims or not tx.dims \
            or tuple(to.dims[:-1]) != tuple(tx.dims[:-1]) or to.dims[-1] != tw.dims[0]:
        raise A.unsupported(call, f"shapes d_out {list(to.dims)}, W {list(tw.dims)}, d_x "
                                  f"{list(tx.dims)} are not d_out[..., N] W[N, K/2] -> "
                                  f"d_x[..., K]")
    n, kb = tw.dims
    k = tx.dims[-1]
    m = tx.numel // k if k else 0
    if m == 0 or n == 0 or k == 0 or gs <= 0:
        raise A.unsupported(call, f"M = {m}, N = {n}, K = {k}, group size {gs}")
    if kb != -(-k // 2):
        raise A.unsupported(call, f"W rows of {kb} bytes for K = {k}: only rows of "
                                  f"ceil(K / 2) = {-(-k // 2)} bytes (no padding past K)")
    groups = group_scales(A, call, scales, k, gs, n)
    return {"dout": dout, "w": w, "scales": scales, "dx": dx, "M": m, "N": n, "K": k,
            "KB": kb, "GS": gs, "G": groups, "SROW": ts.dims[1]}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    m, n, k = p["M"], p["N"], p["K"]
    rm = min(m, ROWS)
    groups = (-(-k // WORKGROUP), -(-m // rm), 1)
    if max(groups) > 65535:
        raise L.unsupported(f"{groups} workgroups exceed 65535 per dimension")
    kern = L.kernel("quantized/linear_q4gsw_backward", M=m, N=n, K=k, KB=p["KB"], GS=p["GS"],
                    SROW=p["SROW"], RM=rm, workgroup=WORKGROUP)
    L.dispatch(kern, [L.buf(p["dout"]), L.buf(p["w"]), L.buf(p["scales"]), L.buf(p["dx"])],
               groups, cost={"bytes_read": n * p["KB"] + 4 * (m * n + p["G"] * n),
                             "macs": m * n * k})


def q4gsw_backward_reference(dout: np.ndarray, w: np.ndarray, scales: np.ndarray,
                             gs: int) -> np.ndarray:
    """d_x (M, K) f32 with the kernel's arithmetic; dout (M, N) f32, w (N, K) int8 unpacked,
    scales (>= G, >= N)."""
    f = np.float32
    n, k = w.shape
    dq = w.astype(f) * scales[np.arange(k) // gs, :n].astype(f).T     # f32 products
    return (dout.astype(np.float64) @ dq.astype(np.float64)).astype(f)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    if p["N"] * p["KB"] != R.get(p["w"]).size:
        raise PlanError(f"{R.args.op_name}: W holds {R.get(p['w']).size} bytes")
    w = unpack_q4gsw(R.get(p["w"]).reshape(p["N"], p["KB"]), p["K"])
    dx = q4gsw_backward_reference(R.get(p["dout"]).reshape(p["M"], p["N"]), w,
                                  R.get(p["scales"]), p["GS"])
    R.set(p["dx"], dx.reshape(R.args.tensor(p["dx"]).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tq Tf i Tf"})]
