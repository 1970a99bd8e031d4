"""et_vk.linear_q4gsw.default: f32 activations x 4-bit group-wise symmetric weights (the
weight-only int4 linear of the published LLMs).

Args: x f32 [..., K], W:C uint8 [N, Kb] (Kb >= K/2 bytes a row: the exporter pads K to a
multiple of 8, `backends/vulkan/patterns/weight_packing_utils.py`), weight_scales:C f32
[G, >= N] (G >= ceil(K / group_size); transposed and padded by the exporter), group_size
Int, bias f32 [>= N] or Null, out f32 [..., N]. Byte j of row n is
`(w[n, 2j+1] + 8) << 4 | (w[n, 2j] + 8)`: the even k in the low nibble, w in [-8, 7];
nibbles past K are padding. Semantics (ExecuTorch `backends/vulkan/custom_ops_lib.py`
`linear_q4gsw`, and its WebGPU kernel):

    out[m, n] = sum_k x[m, k] * w[n, k] * scales[k // group_size, n]  (+ bias[n])

The kernel sums each group in f32 and scales the group's sum once:
`y = sum_g f32(sum_{k in g} x[m, k] * w[n, k]) * scales[g, n]`, groups in order; the numpy
reference does the same with each group's sum in float64 rounded to f32.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit
from .linear_q4 import group_scales, unpack_q4gsw

__all__ = ["UNITS", "q4gsw_linear_reference"]

_NAME = "et_vk.linear_q4gsw.default"
WORKGROUP = 64
ROWS = 4  # output rows per invocation: each W word unpacked once serves this many rows


def _parse(A, call) -> dict:
    """Geometry of the call; raises UnsupportedOpError for forms not handled."""
    x, w, scales, gs_id, bias, out = call.args
    gs = A.int(gs_id)
    tx, tw, ts, to = A.tensor(x), A.tensor(w), A.tensor(scales), A.tensor(out)
    if len(tw.dims) != 2 or not tx.dims or tuple(to.dims) != tuple(tx.dims[:-1]) + tw.dims[:1]:
        raise A.unsupported(call, f"shapes x {list(tx.dims)}, W {list(tw.dims)}, out "
                                  f"{list(to.dims)} are not x[..., K] W[N, >= K/2] -> "
                                  f"out[..., N]")
    n, kb = tw.dims
    k = tx.dims[-1]
    m = tx.numel // k if k else 0
    if m == 0 or n == 0 or gs <= 0:
        raise A.unsupported(call, f"M = {m}, N = {n}, K = {k}, group size {gs}")
    if 2 * kb < k:
        raise A.unsupported(call, f"W rows of {kb} bytes hold fewer than K = {k} weights")
    groups = group_scales(A, call, scales, k, gs, n)
    has_bias = not A.is_null(bias)
    if has_bias and A.tensor(bias).numel < n:
        raise A.unsupported(call, f"bias {list(A.tensor(bias).dims)} has fewer than {n} "
                                  f"entries")
    return {"x": x, "w": w, "scales": scales, "bias": bias if has_bias else None, "out": out,
            "M": m, "N": n, "K": k, "KB": kb, "GS": gs, "G": groups, "SROW": ts.dims[1]}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    m, n, k, gs, kb = p["M"], p["N"], p["K"], p["GS"], p["KB"]
    rm = min(m, ROWS)
    groups = (-(-n // WORKGROUP), -(-m // rm), 1)
    if max(groups) > 65535:
        raise L.unsupported(f"{groups} workgroups exceed 65535 per dimension")
    # Whole u32 words of 8 weights, each inside one group, when rows and groups align.
    words = k % 8 == 0 and gs % 8 == 0 and kb % 4 == 0
    kern = L.kernel("quantized/linear_q4gsw", M=m, N=n, K=k, KB=kb, GS=gs, G=p["G"],
                    SROW=p["SROW"], RM=rm, words=words, has_bias=p["bias"] is not None,
                    workgroup=WORKGROUP)
    vids = [p["x"], p["w"], p["scales"]] + ([p["bias"]] if p["bias"] is not None else [])
    L.dispatch(kern, [L.buf(v) for v in vids] + [L.buf(p["out"])], groups,
               cost={"bytes_read": n * kb + 4 * (m * k + p["G"] * n), "macs": m * n * k})


def q4gsw_linear_reference(x: np.ndarray, w: np.ndarray, scales: np.ndarray, gs: int,
                           bias: np.ndarray | None) -> np.ndarray:
    """out (M, N) f32 with the kernel's arithmetic; x (M, K) f32, w (N, K) int8 unpacked,
    scales (>= G, >= N), bias (>= N) or None."""
    f = np.float32
    m, k = x.shape
    n = w.shape[0]
    y = np.zeros((m, n), f)
    for g, k0 in enumerate(range(0, k, gs)):
        part = x[:, k0:k0 + gs].astype(np.float64) @ w[:, k0:k0 + gs].T.astype(np.float64)
        y = y + part.astype(f) * scales[g, :n].astype(f)
    if bias is not None:
        y = y + bias.reshape(-1)[:n].astype(f)
    return y


def reference(R, call) -> None:
    p = _parse(R.args, call)
    m, k = p["M"], p["K"]
    if p["N"] * p["KB"] != R.get(p["w"]).size:
        raise PlanError(f"{R.args.op_name}: W holds {R.get(p['w']).size} bytes")
    bias = None if p["bias"] is None else R.get(p["bias"])
    y = q4gsw_linear_reference(R.get(p["x"]).reshape(m, k), unpack_q4gsw(R.get(p["w"]), k),
                               R.get(p["scales"]), p["GS"], bias)
    R.set(p["out"], y.reshape(R.args.tensor(p["out"]).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tq Tf i Tf? Tf"})]
