"""4-bit weight linears: et_vk.linear_qcs4w.default and et_vk.linear_dq8ca_q4gsw.default.

linear_qcs4w: f32 activations x 4-bit per-channel symmetric weights.

Args: x f32 [..., K], W:C uint8 [N, K/2], scales:C f32 [N], out f32 [..., N].
W is the exporter's packing (`backends/vulkan/_passes/fuse_quantized_ops.py`): byte j of
row n is `(w[n, 2j] + 8) << 4 | (w[n, 2j + 1] + 8)`, the even k in the high nibble, with
w in [-8, 7]. The kernel reads W as its file bytes (four per u32 word) and unpacks the
nibbles in registers; nothing is repacked at load.

Arithmetic: acc[m, n] = sum_k x[m, k] * f32(w[n, k]) in f32, y = acc * scales[n]; the
numpy reference sums in float64 and rounds, as the f32 linear's does (matmul.py).

linear_dq8ca_q4gsw: x f32 [..., K] quantized per row to int8 with the given scales f32 [M]
and zero points [M] (from choose_qparams_affine), x 4-bit group-symmetric W:C uint8
[N, Kp/2] (K padded to Kp, a multiple of 8; `backends/vulkan/patterns/weight_packing_utils.py`:
byte j is `(w[2j+1] + 8) << 4 | (w[2j] + 8)`, the even k in the low nibble), weight_sums:C
int32 [G, >=N] (sum of w per group), weight_scales:C f32 [G, >=N], group_size, bias f32 [N]
or Null, out f32 [..., N]. Two dispatches: quantize_rows writes xq as torch quantizes
(`q = clamp(round(x * f32(1/scale)) + zp, -128, 127)`, the reciprocal correctly rounded),
in W's nibble order; then per group the exact int32 accumulator
    acc_g[m, n] = sum_{k in g} xq[m, k] * w[n, k]
and, in f32, y = sum_g f32(acc_g - zp[m] * sums[g, n]) * wscale[g, n], out = y * scale[m]
(+ bias[n]). The numpy reference does exactly this (int64 accumulators, f32 steps); the
accumulation uses dot4I8Packed when the lowering's features include it.
The semantics are torchao's 8da4w linear (choose_qparams_affine, quantize_affine,
dequantize_affine, F.linear), which ExecuTorch's WebGPU op tests take as this op's golden;
the op's composite in `backends/vulkan/custom_ops_lib.py` ignores the input scales and zero
points (a float linear of x, ~1e-2 rel-L2 away) and is not.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit
from ..storage import storage_of
from .linear_q8 import use_dot4

__all__ = ["UNITS", "unpack_qcs4w", "unpack_q4gsw", "dq8ca_q4gsw_reference"]

NAME = "et_vk.linear_qcs4w.default"
DQ8CA = "et_vk.linear_dq8ca_q4gsw.default"
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


# -- linear_dq8ca_q4gsw -------------------------------------------------------------------

def _dq8ca_parse(A, call) -> dict:
    """Geometry of a dq8ca x q4gsw linear; raises UnsupportedOpError for forms not handled."""
    x, xs, xz, w, sums, ws, gs, bias, out = call.args
    gs = A.int(gs)
    tx, tw, to = A.tensor(x), A.tensor(w), A.tensor(out)
    if len(tw.dims) != 2 or not tx.dims or tuple(to.dims) != tuple(tx.dims[:-1]) + tw.dims[:1]:
        raise A.unsupported(call, f"shapes x {list(tx.dims)}, W {list(tw.dims)}, out "
                                  f"{list(to.dims)} are not x[..., K] W[N, K/2] -> out[..., N]")
    n, wbytes = tw.dims
    k = tx.dims[-1]
    m = tx.numel // k if k else 0
    if m == 0 or n == 0 or k % 8 or gs <= 0 or gs % 8 or k % gs:
        raise A.unsupported(call, f"M = {m}, N = {n}, K = {k}, group size {gs}: needs K and "
                                  "the group size multiples of 8, K a multiple of the group")
    if wbytes % 4 or 2 * wbytes < k:
        raise A.unsupported(call, f"W rows of {wbytes} bytes for K = {k} (needs whole "
                                  "words, at least K/2 bytes)")
    groups = k // gs
    for vid, what in ((sums, "weight sums"), (ws, "weight scales")):
        d = A.tensor(vid).dims
        if len(d) != 2 or d[0] != groups or d[1] < n:
            raise A.unsupported(call, f"{what} {list(d)} should be [{groups}, >= {n}]")
    if A.tensor(xs).numel != m or A.tensor(xz).numel != m:
        raise A.unsupported(call, f"input scales {list(A.tensor(xs).dims)} and zero points "
                                  f"{list(A.tensor(xz).dims)} should have one entry per row "
                                  f"({m})")
    has_bias = not A.is_null(bias)
    if has_bias and A.tensor(bias).numel < n:
        raise A.unsupported(call, f"bias {list(A.tensor(bias).dims)} has fewer than {n} entries")
    if storage_of(A.tensor(xz)) not in ("i8", "u8", "i32"):
        raise A.unsupported(call, f"input zero points of dtype {A.tensor(xz).dtype.name}")
    return {"x": x, "xs": xs, "xz": xz, "w": w, "sums": sums, "ws": ws,
            "bias": bias if has_bias else None, "out": out, "M": m, "N": n, "K": k, "GS": gs,
            "WR": wbytes // 4, "SUMS_ROW": A.tensor(sums).dims[1],
            "SCALES_ROW": A.tensor(ws).dims[1]}


def lower_dq8ca(L, call) -> None:
    p = _dq8ca_parse(L.args, call)
    m, n, k = p["M"], p["N"], p["K"]
    zp_kind = L.storage(p["xz"])
    xq = L.scratch(m * k, f"xq{p['x']}")  # (M, K) int8 in W's nibble order
    wg, row = L.grid(m * k // 4)
    quant = L.kernel("quantized/quantize_rows", M=m, K=k, zp_kind=zp_kind, workgroup=256,
                     row=row)
    L.dispatch(quant, [L.buf(p["x"]), L.buf(p["xs"]), L.buf(p["xz"]), xq], wg)
    rm = min(m, ROWS)
    groups = (-(-n // WORKGROUP), -(-m // rm), 1)
    if max(groups) > 65535:
        raise L.unsupported(f"{groups} workgroups exceed 65535 per dimension")
    kern = L.kernel("quantized/linear_dq8ca_q4gsw", M=m, N=n, K=k, GS=p["GS"], WR=p["WR"],
                    SUMS_ROW=p["SUMS_ROW"], SCALES_ROW=p["SCALES_ROW"], RM=rm,
                    zp_kind=zp_kind, has_bias=p["bias"] is not None,
                    dot4=use_dot4(L.features, hinted=False), workgroup=WORKGROUP)
    vids = [p["w"], p["sums"], p["ws"], p["xs"], p["xz"]] + (
        [p["bias"]] if p["bias"] is not None else [])
    L.dispatch(kern, [xq] + [L.buf(v) for v in vids] + [L.buf(p["out"])], groups)


def group_scales(A, call, scales, k: int, gs: int, n: int, what: str = "weight scales") -> int:
    """The group count of K = `k` in groups of `gs` along it, once `scales` (the transposed
    [groups, >= N] f32 layout of the 4-bit group-wise ops) holds one per group and column."""
    groups = -(-k // gs)
    dims = A.tensor(scales).dims
    if len(dims) != 2 or dims[0] < groups or dims[1] < n:
        raise A.unsupported(call, f"{what} {list(dims)} should be [>= {groups}, >= {n}] for "
                                  f"K = {k}, group size {gs}, N = {n}")
    return groups


def unpack_q4gsw(packed: np.ndarray, k: int) -> np.ndarray:
    """W (N, K) int8 in [-8, 7] from its packed bytes (N, >= K/2): even k in the low nibble."""
    b = packed.astype(np.int32)
    w = np.empty((b.shape[0], 2 * b.shape[1]), np.int8)
    w[:, 0::2] = (b & 15) - 8
    w[:, 1::2] = (b >> 4) - 8
    return w[:, :k]


def dq8ca_q4gsw_reference(x: np.ndarray, xscale: np.ndarray, xzp: np.ndarray,
                          w: np.ndarray, sums: np.ndarray, wscale: np.ndarray, gs: int,
                          bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(out (M, N) f32, accumulators (G, M, N) int64) with the kernels' arithmetic;
    x (M, K) f32, w (N, K) int8 unpacked, per-row xscale/xzp, sums/wscale (G, >= N)."""
    f = np.float32
    m, k = x.shape
    n = w.shape[0]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = (f(1) / xscale.reshape(m).astype(f))[:, None]
        q = np.clip(np.round(x.astype(f) * inv) + xzp.reshape(m, 1).astype(f), f(-128), f(127))
    q = q.astype(np.int64)
    acc = np.einsum("mgk,ngk->gmn", q.reshape(m, -1, gs), w.astype(np.int64).reshape(n, -1, gs))
    zp = xzp.reshape(1, m, 1).astype(np.int64)
    adj = (acc - zp * sums[:, None, :n].astype(np.int64)).astype(f)
    y = np.zeros((m, n), f)
    for g in range(acc.shape[0]):
        y = y + adj[g] * wscale[g, :n].astype(f)
    y = y * xscale.reshape(m, 1).astype(f)
    if bias is not None:
        y = y + bias.reshape(-1)[:n].astype(f)
    return y, acc


def reference_dq8ca(R, call) -> None:
    p = _dq8ca_parse(R.args, call)
    m, k = p["M"], p["K"]
    bias = None if p["bias"] is None else R.get(p["bias"])
    y, _ = dq8ca_q4gsw_reference(R.get(p["x"]).reshape(m, k), R.get(p["xs"]), R.get(p["xz"]),
                                 unpack_q4gsw(R.get(p["w"]), k), R.get(p["sums"]),
                                 R.get(p["ws"]), p["GS"], bias)
    R.set(p["out"], y.reshape(R.args.tensor(p["out"]).dims))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "Tf Tq Tf Tf"}),
         OpUnit((DQ8CA,), lower_dq8ca, reference_dq8ca, {DQ8CA: "Tf Tf T Tq Ti Tf i Tf? Tf"})]
