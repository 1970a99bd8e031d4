"""et_vk.embedding_q4gsw.default: a token embedding from a 4-bit group-wise symmetric table.

Args: weight:C uint8 [V, D/2], weight_scales:C f32 [V, G] (G * group_size == D),
group_size Int, indices int [...], is_linear_weight Bool, out f32 [..., D]. Row v holds
w[v, d] in [-8, 7] two to a byte, stored + 8; with is_linear_weight the even d is the low
nibble (linear_q4gsw's packing, which ExecuTorch's exporter always writes so a tied LM
head can share the table), else the high nibble (quantized_decomposed.embedding_4bit's).
Semantics (ExecuTorch `backends/vulkan/custom_ops_lib.py` `embedding_q4gsw_impl`, and its
WebGPU kernel):

    out[p, d] = f32(w[i, d]) * scales[i, d // group_size],  i = indices[p]

one f32 product, so kernel and reference agree exactly. torch raises on an index outside
[0, V); a kernel cannot, so both clamp it into that range (as aten.embedding does here).
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit

__all__ = ["UNITS", "unpack_embedding_q4"]

_NAME = "et_vk.embedding_q4gsw.default"


def _parse(A, call) -> dict:
    w, scales, gs_id, indices, linear_id, out = call.args
    gs, linear = A.int(gs_id), A.bool(linear_id)
    tw, ts, ti, to = A.tensor(w), A.tensor(scales), A.tensor(indices), A.tensor(out)
    if len(tw.dims) != 2 or 0 in tw.dims:
        raise A.unsupported(call, f"weight {list(tw.dims)} should be a [V, D/2] table")
    v, db = tw.dims
    d = 2 * db
    if gs <= 0 or d % gs or tuple(ts.dims) != (v, d // gs):
        raise A.unsupported(call, f"weight scales {list(ts.dims)} with group size {gs} do "
                                  f"not tile rows of D = {d}: should be [{v}, D / group size]")
    if tuple(to.dims) != tuple(ti.dims) + (d,):
        raise PlanError(f"{A.op_name}: gives dims {list(ti.dims) + [d]}, the output tensor "
                        f"has {list(to.dims)}")
    return {"w": w, "scales": scales, "indices": indices, "out": out, "V": v, "D": d,
            "GS": gs, "linear": linear, "n": to.numel}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    if p["n"] == 0:
        return
    wg, row = L.grid(p["n"])
    k = L.kernel("quantized/embedding_q4gsw", n=p["n"], V=p["V"], D=p["D"], GS=p["GS"],
                 linear=p["linear"], workgroup=256, row=row)
    L.dispatch(k, [L.buf(p["w"]), L.buf(p["scales"]), L.buf(p["indices"]), L.buf(p["out"])],
               wg)


def unpack_embedding_q4(packed: np.ndarray, linear: bool) -> np.ndarray:
    """w (V, D) int8 in [-8, 7] from its packed bytes (V, D/2)."""
    b = packed.astype(np.int32)
    lo, hi = (b & 15) - 8, (b >> 4) - 8
    w = np.empty((b.shape[0], 2 * b.shape[1]), np.int8)
    w[:, 0::2], w[:, 1::2] = (lo, hi) if linear else (hi, lo)
    return w


def reference(R, call) -> None:
    p = _parse(R.args, call)
    w = unpack_embedding_q4(R.get(p["w"]), p["linear"])
    scales = np.repeat(R.get(p["scales"]).astype(np.float32), p["GS"], axis=1)  # (V, D)
    table = w.astype(np.float32) * scales
    idx = np.clip(R.get(p["indices"]).astype(np.int64), 0, p["V"] - 1)
    R.set(p["out"], table[idx])


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tq Tf i Ti b Tf"})]
