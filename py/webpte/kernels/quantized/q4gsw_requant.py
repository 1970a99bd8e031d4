"""et_vk.q4gsw_requant.default: f32 latent weights re-quantized to linear_q4gsw's packed 4-bit
codes at frozen group-wise scales (the straight-through step of quantization-aware
training: only the codes move).

Args: latent f32 [N, K], scales f32 [G, >= N] (G >= ceil(K / group_size), the transposed
layout linear_q4gsw reads), group_size Int, out uint8 [N, ceil(K / 2)]. Semantics
(ExecuTorch `backends/vulkan/custom_ops_lib.py` `q4gsw_requant_impl`, and its WebGPU
kernel), with s = scales[k // group_size, n]:

    q[n, k] = clamp(round_half_even(f32(latent[n, k] / s)), -8, 7), or 0 where s == 0
    out[n, j] = (q[n, 2j + 1] + 8) << 4 | (q[n, 2j] + 8)   (the high nibble 0 past K)

so the even k is the low nibble, as linear_q4gsw and linear_q4gsw_backward read it. The
division is correctly rounded in f32 as torch's is (WGSL's `/` may be 2.5 ulp off, which
moves ties), so kernel and reference agree bit for bit; an infinite latent clamps to -8 or
7, a NaN gives an unspecified code (torch's integer conversion of NaN is undefined too). A
subnormal latent or scale takes WGSL's division (never met by trained weights and their
scales). Group sizes need not divide K. ExecuTorch's WebGPU kernel also refuses outputs of
N * ceil(K / 2) bytes that are not whole u32 words; here every size is covered.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit
from ..storage import storage_of
from .linear_q4 import group_scales

__all__ = ["UNITS", "q4gsw_requant_reference"]

_NAME = "et_vk.q4gsw_requant.default"
WORKGROUP = 64


def _parse(A, call) -> dict:
    """Geometry of the call; raises UnsupportedOpError for forms not handled."""
    latent, scales, gs_id, out = call.args
    gs = A.int(gs_id)
    tl, ts, to = A.tensor(latent), A.tensor(scales), A.tensor(out)
    if len(tl.dims) != 2 or 0 in tl.dims or gs <= 0:
        raise A.unsupported(call, f"latent {list(tl.dims)} with group size {gs}: only a "
                                  f"non-empty [N, K] and a positive group size")
    n, k = tl.dims
    kb = -(-k // 2)
    if storage_of(to) != "u8" or tuple(to.dims) != (n, kb):
        raise A.unsupported(call, f"output {to.dtype.name} {list(to.dims)}: only uint8 "
                                  f"[{n}, {kb}] (two codes a byte) for latent [{n}, {k}]")
    group_scales(A, call, scales, k, gs, n, "scales")
    return {"latent": latent, "scales": scales, "out": out, "N": n, "K": k, "KB": kb,
            "GS": gs, "SROW": ts.dims[1]}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    words = -(-p["N"] * p["KB"] // 4)       # one packed output word per invocation
    wg, row = L.grid(words, WORKGROUP)
    kern = L.kernel("quantized/q4gsw_requant", N=p["N"], K=p["K"], KB=p["KB"], GS=p["GS"],
                    SROW=p["SROW"], words=words, workgroup=WORKGROUP, row=row)
    L.dispatch(kern, [L.buf(p["latent"]), L.buf(p["scales"]), L.buf(p["out"])], wg)


def q4gsw_requant_reference(latent: np.ndarray, scales: np.ndarray, gs: int) -> np.ndarray:
    """Packed codes (N, ceil(K / 2)) uint8 from latent (N, K) f32 and scales (>= G, >= N),
    with the kernel's arithmetic: a correctly rounded f32 division, half-even rounding."""
    f = np.float32
    n, k = latent.shape
    s = scales[np.arange(k) // gs, :n].astype(f).T                    # (N, K)
    nonzero = s != 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q = np.round(latent.astype(f) / np.where(nonzero, s, f(1)))
        q = np.clip(np.where(nonzero, q, f(0)), f(-8), f(7))
    codes = (np.nan_to_num(q).astype(np.int32) + 8) & 15
    codes = np.pad(codes, ((0, 0), (0, 2 * -(-k // 2) - k)), constant_values=0)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    R.set(p["out"], q4gsw_requant_reference(R.get(p["latent"]).reshape(p["N"], p["K"]),
                                            R.get(p["scales"]), p["GS"]))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf i Tq"})]
