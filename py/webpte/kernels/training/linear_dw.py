"""et_vk.linear_dW.default: the weight gradient of a linear layer (the straight-through
gradient of linear_q4gsw's frozen 4-bit base, taken on the f32 latent).

Args: d_out f32 [..., N], x f32 [..., K], d_W f32 [N, K] (the output). Semantics
(ExecuTorch `backends/vulkan/custom_ops_lib.py` `linear_dW_impl` and its WebGPU kernel):
both inputs are flattened to rows, M = numel(d_out) / N = numel(x) / K, and

    d_W[n, k] = sum_m d_out[m, n] * x[m, k]

The leading dims of d_out and x need not match, only their row count M. Refused: a d_W that
is not 2-D or whose dims are not (d_out's last, x's last), row counts that differ, empty
tensors (M, N or K of 0), dtypes other than f32.

The kernel sums the products over m in order in f32, a 4 x 4 block of d_W per invocation;
the numpy reference sums the exact products in float64, rounded to f32 once.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit

__all__ = ["UNITS"]

_NAME = "et_vk.linear_dW.default"
WORKGROUP = 64
TILE = 4  # d_W rows and columns per invocation: each loaded value serves 4 products


def _parse(A, call) -> dict:
    """Geometry of the call; raises UnsupportedOpError for forms not handled."""
    dout, x, dw = call.args
    to, tx, tw = A.tensor(dout), A.tensor(x), A.tensor(dw)
    if not to.dims or not tx.dims or len(tw.dims) != 2 \
            or tuple(tw.dims) != (to.dims[-1], tx.dims[-1]):
        raise A.unsupported(call, f"shapes d_out {list(to.dims)}, x {list(tx.dims)}, d_W "
                                  f"{list(tw.dims)} are not d_out[..., N] x[..., K] -> "
                                  f"d_W[N, K]")
    n, k = tw.dims
    if n == 0 or k == 0 or to.numel == 0 or tx.numel == 0:
        raise A.unsupported(call, f"empty tensors: d_out {list(to.dims)}, x {list(tx.dims)}")
    m = to.numel // n
    if tx.numel // k != m:
        raise A.unsupported(call, f"d_out {list(to.dims)} has {m} rows, x {list(tx.dims)} "
                                  f"has {tx.numel // k}: the row counts must match")
    return {"dout": dout, "x": x, "dw": dw, "M": m, "N": n, "K": k}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    L.require_f32("linear_dW", (p["dout"], p["x"], p["dw"]))
    m, n, k = p["M"], p["N"], p["K"]
    kt = -(-k // TILE)
    tiles = -(-n // TILE) * kt
    groups, row = L.grid(tiles, WORKGROUP)
    kern = L.kernel("training/linear_dw", M=m, N=n, K=k, KT=kt, tiles=tiles, T=TILE,
                    workgroup=WORKGROUP, row=row)
    L.dispatch(kern, [L.buf(p["dout"]), L.buf(p["x"]), L.buf(p["dw"])], groups,
               cost={"bytes_read": 4 * m * (n + k), "macs": m * n * k})


def linear_dw_reference(dout: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d_W (N, K) f32 of dout (M, N) and x (M, K) f32, summed in float64."""
    return (dout.astype(np.float64).T @ x.astype(np.float64)).astype(np.float32)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    dw = linear_dw_reference(R.get(p["dout"]).reshape(p["M"], p["N"]),
                             R.get(p["x"]).reshape(p["M"], p["K"]))
    R.set(p["dw"], dw)


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf"})]
