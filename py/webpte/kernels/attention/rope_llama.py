"""et_vk.apply_rotary_emb.default: Llama's RoPE on q and k (examples/models/llama/rope.py).

Args: xq [..., S, Hq, D], xk [..., S, Hk, D] (rank >= 3, D even), freqs_cos and freqs_sin
of one shape holding S * D/2 elements (last dim D/2: [S, D/2]), ValueList[q_out, k_out]
shaped as xq and xk, all float32. Each (real, imag) pair 2i, 2i+1 of position s is turned
by the angle of row s, column i:

    out[2i]     = x[2i] * cos[s, i] - x[2i+1] * sin[s, i]
    out[2i + 1] = x[2i] * sin[s, i] + x[2i+1] * cos[s, i]

(ExecuTorch `backends/vulkan/patterns/rope.py` `RotaryEmbeddingPattern`, the op's reference,
and its WebGPU kernel, which also takes S from dim -3 and shares the table across leading
dims.) One invocation per pair, q's pairs then k's, in one dispatch.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit

_NAME = "et_vk.apply_rotary_emb.default"


def _parse(A, call) -> dict:
    xq, xk, cos, sin, outs = call.args
    q_out, k_out = A.value_list(outs)
    tq, tk, tc = A.tensor(xq), A.tensor(xk), A.tensor(cos)
    if len(tq.dims) < 3 or len(tk.dims) < 3 or tq.dims[-1] % 2 or tq.dims[-1] != tk.dims[-1] \
            or tq.dims[-3] != tk.dims[-3] or 0 in tq.dims or 0 in tk.dims:
        raise A.unsupported(call, f"xq {list(tq.dims)} and xk {list(tk.dims)} must be "
                                  f"[..., S, H, D] with the same S and an even D")
    s, hq, d = tq.dims[-3:]
    hk = tk.dims[-2]
    if tuple(A.tensor(sin).dims) != tuple(tc.dims) or tc.dims[-1:] != (d // 2,) \
            or tc.numel != s * d // 2:
        raise A.unsupported(call, f"freqs_cos {list(tc.dims)} and freqs_sin "
                                  f"{list(A.tensor(sin).dims)} must both be [{s}, {d // 2}]")
    if tuple(A.tensor(q_out).dims) != tuple(tq.dims) or \
            tuple(A.tensor(k_out).dims) != tuple(tk.dims):
        raise A.unsupported(call, "outputs must have the shapes of xq and xk")
    return {"xq": xq, "xk": xk, "cos": cos, "sin": sin, "q_out": q_out, "k_out": k_out,
            "S": s, "HQ": hq, "HK": hk, "D": d, "PQ": tq.numel // 2, "PK": tk.numel // 2}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    wg, row = L.grid(p["PQ"] + p["PK"])
    k = L.kernel("attention/rope_llama", seq=p["S"], hq=p["HQ"], hk=p["HK"], d=p["D"],
                 pq=p["PQ"], pk=p["PK"], workgroup=256, row=row)
    L.dispatch(k, [L.buf(p[n]) for n in ("xq", "xk", "cos", "sin", "q_out", "k_out")], wg)


def rope_llama_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [..., S, H, D] turned pair by pair with cos/sin [S, D/2], in float32."""
    s, d = x.shape[-3], x.shape[-1]
    c = cos.reshape(s, 1, d // 2)  # (S, 1, D/2): shared by the heads and leading dims
    sn = sin.reshape(s, 1, d // 2)
    re, im = x[..., 0::2], x[..., 1::2]
    return np.stack([re * c - im * sn, re * sn + im * c], axis=-1).reshape(x.shape)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    c, sn = R.get(p["cos"]), R.get(p["sin"])
    R.set(p["q_out"], rope_llama_reference(R.get(p["xq"]), c, sn))
    R.set(p["k_out"], rope_llama_reference(R.get(p["xk"]), c, sn))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf Tf L"})]
