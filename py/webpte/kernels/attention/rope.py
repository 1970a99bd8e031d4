"""et_vk.apply_rotary_emb_hf.default: HF-style RoPE on q and k at a run-time position.

Args: xq [B,S,Hq,D], xk [B,S,Hk,D], freqs_cos [ctx,R], freqs_sin [ctx,R], start SymInt,
ValueList[q_out, k_out]. For d < R (R = rotary dim, R == D unless partial rotation):
`out = x*cos[p] + rotate_half(x)*sin[p]` with `p = start + s` and
`rotate_half(x) = cat(-x[R/2:R], x[:R/2])`; elements d >= R pass through (executorch
1.5.1 `HfRotaryEmbeddingPattern`). The start is read from the SymInt's buffer and the
row is clamped into the table on the GPU; the reference refuses an out-of-range one.
"""

from __future__ import annotations

from ...errors import InputError
from .._np import np
from ..registry import OpUnit

_NAME = "et_vk.apply_rotary_emb_hf.default"


def _parse(A, call):
    xq, xk, cos, sin, start, outs = call.args
    A.symint(start)
    q_out, k_out = A.value_list(outs)
    return xq, xk, cos, sin, start, q_out, k_out


def lower(L, call) -> None:
    xq, xk, cos, sin, start, q_out, k_out = _parse(L.args, call)
    tq, tk, tc = L.tensor(xq), L.tensor(xk), L.tensor(cos)
    if len(tq.dims) != 4 or len(tk.dims) != 4 or tq.dims[:2] != tk.dims[:2] \
            or tq.dims[3] != tk.dims[3]:
        raise L.unsupported(f"xq {list(tq.dims)} and xk {list(tk.dims)} must be [B,S,H,D] "
                            f"with the same B, S and D")
    b, s, hq, d = tq.dims
    hk = tk.dims[2]
    if len(tc.dims) != 2 or tuple(L.tensor(sin).dims) != tuple(tc.dims):
        raise L.unsupported(f"freqs_cos {list(tc.dims)} and freqs_sin "
                            f"{list(L.tensor(sin).dims)} must both be [ctx, rotary_dim]")
    ctx, rot = tc.dims
    if rot % 2 or not 0 < rot <= d or ctx < 1:
        raise L.unsupported(f"rotary dim {rot} must be even and in 1..head dim {d}")
    if tuple(L.tensor(q_out).dims) != tuple(tq.dims) or \
            tuple(L.tensor(k_out).dims) != tuple(tk.dims):
        raise L.unsupported("outputs must have the shapes of xq and xk")
    if {L.storage(v) for v in (xq, xk, cos, sin, q_out, k_out)} != {"f32"}:
        raise L.unsupported("apply_rotary_emb_hf runs on float32 tensors only")
    nq, nk = b * s * hq * d, b * s * hk * d
    wg, row = L.grid(nq + nk)
    k = L.kernel("attention/rope", seq=s, hq=hq, hk=hk, d=d, rot=rot, ctx=ctx, nq=nq, nk=nk,
                 workgroup=256, row=row)
    L.dispatch(k, [L.buf(xq), L.buf(xk), L.buf(cos), L.buf(sin), L.buf(start),
                   L.buf(q_out), L.buf(k_out)], wg)


def rope_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, start: int) -> np.ndarray:
    """x [B,S,H,D] rotated at positions start..start+S-1, in float32."""
    s, rot = x.shape[1], cos.shape[1]
    if start < 0 or start + s > cos.shape[0]:
        raise InputError(f"{_NAME}: positions {start}..{start + s - 1} are outside the "
                         f"{cos.shape[0]}-row frequency table")
    c = cos[start:start + s][None, :, None, :]  # (1, S, 1, R)
    sn = sin[start:start + s][None, :, None, :]
    xr = x[..., :rot]
    rotated = np.concatenate([-xr[..., rot // 2:], xr[..., :rot // 2]], axis=-1)
    out = x.copy()
    out[..., :rot] = xr * c + rotated * sn
    return out


def reference(R, call) -> None:
    xq, xk, cos, sin, start, q_out, k_out = _parse(R.args, call)
    c, sn, p = R.get(cos), R.get(sin), R.scalar(start)
    R.set(q_out, rope_reference(R.get(xq), c, sn, p))
    R.set(k_out, rope_reference(R.get(xk), c, sn, p))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T T T T Y L"})]
