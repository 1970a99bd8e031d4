"""aten.bmm.default, aten.linear.default and aten.addmm.default: f32 matmuls tiled in
workgroup memory (or, on CPU adapters, untiled: `direct_fit`).

`emit_matmul` is the shared lowering (conv.py uses it for patch embeddings).
The numpy reference accumulates in float64 and rounds the result to float32.
"""

from __future__ import annotations

from ...errors import UnsupportedOpError
from .._np import np
from ..registry import OpUnit

TK = 8  # k depth of a tile: (TM + TN) * TK * 4 bytes of workgroup memory (<= 8 KiB)
# Products of at most this many multiply-adds take the 4x8 block: SwiftShader compiles its
# pipeline in 0.4 s, the 8x8 and 8x16 blocks' in 1-2.5 s (in the page, each of MobileNetV3's
# 24 distinct 1x1 convolutions and linears), while the run is a few microseconds either way.
SMALL_PRODUCT_MACS = 1 << 18
# Planner hint (planner/hints.py, CPU adapters): products read their operands straight from
# storage, RM x RN outputs per invocation, no workgroup staging and no barriers, which on
# lavapipe cost more than the reuse they buy (a GPU keeps the tiles).
F32_GEMM_DIRECT = "f32_gemm:direct"
DIRECT_MAX_K = 1024
# (RM, RN) outputs per invocation: up to K 256 more columns (the tower's q.k^T, K 64: 8x16
# 1.3-1.6x the tiled kernel, 16x8 1.1x), beyond it more rows (p.v, K 1024: 16x8 1.4x, 8x16
# 1.0x; lavapipe, one process, interleaved, min of 8).
DIRECT_SHORT_K = 256
DIRECT_BLOCKS = {"short": (8, 16), "long": (16, 8)}


def pick_tile(M: int, N: int, K: int) -> tuple[int, int, int, int, int]:
    """(TM, TN, TK, RM, RN): workgroup tile and per-invocation block.

    Large blocks (8x16 outputs per invocation) keep loads per multiply-add low, which is
    what bounds lavapipe (every workgroup-memory load is a per-lane loop); small M or N
    get smaller tiles so little work is wasted at the edges. A small product takes the
    smallest block whatever its shape: its cost is its pipeline's compile, not its run.
    """
    if M * N * K <= SMALL_PRODUCT_MACS:
        return 16, 64, TK, 4, 8
    TM, RM = (128, 8) if M > 64 else (64, 8) if M > 16 else (16, 4)
    TN, RN = (128, 16) if N > 64 else (64, 8)
    return TM, TN, TK, RM, RN


def _fill_mode(strides, t_axis: int, T: int, K: int) -> str:
    """How a tile is loaded: vec4 along k ("k4"), along the tile axis ("t4"), or scalars.

    vec4 loads need the unit-stride axis and every other stride to be multiples of 4.
    """
    z, t, k = (strides[0], strides[t_axis], strides[3 - t_axis])
    if k == 1 and K % 4 == 0 and z % 4 == 0 and t % 4 == 0:
        return "k4"
    if t == 1 and T % 4 == 0 and z % 4 == 0 and k % 4 == 0:
        return "t4"
    return "scalar"


def direct_fit(features, a_strides, b_strides, K: int, N: int) -> bool:
    """Whether the CPU adapters' untiled kernel runs this product: the hint asks for it, A's k
    and B's n are unit-stride with every stride, K and N multiples of 4 (vec4 loads and
    stores), and K at most DIRECT_MAX_K (the longest measured)."""
    return (F32_GEMM_DIRECT in features and a_strides[2] == 1 and b_strides[2] == 1
            and 4 <= K <= DIRECT_MAX_K and K % 4 == 0 and N % 4 == 0
            and all(s % 4 == 0 for s in (a_strides[0], a_strides[1], b_strides[0], b_strides[1])))


def emit_matmul(L, what: str, a: int, b: int, out: int, *, batch: int, M: int, N: int,
                K: int, a_strides, b_strides, bias: int | None = None,
                bias_axis: str = "n", b_fill: str | None = None, b_layout: str = "strided",
                **layout) -> None:
    """Dispatch out[z, m, n] = sum_k A[z, m, k] * B[z, k, n] (+ bias[n] or bias[m]).

    Strides are element strides (z, m, k) of A and (z, k, n) of B; `out` is contiguous
    [batch, M, N]. b_layout "patch" gathers B from an NCHW image (see conv.py); its
    geometry comes in `layout` and its fill mode in `b_fill`.
    """
    L.require_f32(what, (a, b, out) + (() if bias is None else (bias,)))
    if M * N * batch == 0:
        raise L.unsupported(f"{what} with an empty output ({batch}x{M}x{N})")
    if batch > 65535:
        raise L.unsupported(f"{what}: batch {batch} exceeds 65535 workgroups")
    binds = [L.buf(a), L.buf(b)] + ([] if bias is None else [L.buf(bias)]) + [L.buf(out)]
    if b_layout == "strided" and direct_fit(L.features, a_strides, b_strides, K, N):
        RM, RN = DIRECT_BLOCKS["short" if K <= DIRECT_SHORT_K else "long"]
        WX = min(8, -(-N // RN))
        WY = 64 // WX
        groups = (-(-N // (RN * WX)), -(-M // (RM * WY)), batch)
        k = L.kernel("matmul/matmul_direct", what=what, batch=batch, M=M, N=N, K=K, RM=RM,
                     RN=RN, WX=WX, WY=WY, GX=groups[0], a_strides=list(a_strides),
                     b_strides=list(b_strides), bias="none" if bias is None else bias_axis)
        L.dispatch(k, binds, groups)
        return
    TM, TN, tk, RM, RN = pick_tile(M, N, K)
    k = L.kernel("matmul/matmul", what=what, batch=batch, M=M, N=N, K=K, TM=TM, TN=TN, TK=tk,
                 RM=RM, RN=RN, a_strides=list(a_strides), b_strides=list(b_strides),
                 a_fill=_fill_mode(a_strides, 1, M, K),
                 b_fill=b_fill or _fill_mode(b_strides, 2, N, K),
                 # For scalar fills: which axis consecutive invocations walk.
                 a_k_fast=a_strides[2] == 1, b_k_fast=b_layout == "patch" or b_strides[1] == 1,
                 check_m=M % TM != 0, check_n=N % TN != 0, check_k=K % tk != 0,
                 bias="none" if bias is None else bias_axis, b_layout=b_layout, **layout)
    L.dispatch(k, binds, (-(-N // TN), -(-M // TM), batch))


# -- aten.bmm.default ------------------------------------------------------------

def _bmm_shapes(A, call):
    a, b, out = call.args
    da, db, do = A.tensor(a).dims, A.tensor(b).dims, A.tensor(out).dims
    ok = (len(da) == len(db) == 3 and da[0] == db[0] and da[2] == db[1]
          and tuple(do) == (da[0], da[1], db[2]))
    return a, b, out, da, db, do, ok


def lower_bmm(L, call) -> None:
    a, b, out, da, db, do, ok = _bmm_shapes(L.args, call)
    if not ok:
        raise L.unsupported(f"bmm needs [B,M,K] x [B,K,N] -> [B,M,N], got {list(da)} x "
                            f"{list(db)} -> {list(do)}")
    B, M, K = da
    N = db[2]
    emit_matmul(L, "bmm", a, b, out, batch=B, M=M, N=N, K=K,
                a_strides=(M * K, K, 1), b_strides=(K * N, N, 1))


def reference_bmm(R, call) -> None:
    a, b, out, *_ = _bmm_shapes(R.args, call)
    R.set(out, np.matmul(R.get(a).astype(np.float64), R.get(b).astype(np.float64)))


# -- aten.linear.default ------------------------------------------------------------

def _linear_parse(A, call):
    x, w, bias, out = call.args
    dx, dw, do = A.tensor(x).dims, A.tensor(w).dims, A.tensor(out).dims
    has_bias = not A.is_null(bias)
    why = None
    if len(dw) != 2 or not dx or dx[-1] != dw[1]:
        why = f"linear needs x [..., K] and W [N, K], got x {list(dx)} and W {list(dw)}"
    elif tuple(do) != tuple(dx[:-1]) + (dw[0],):
        why = f"linear output {list(do)} does not match x {list(dx)} and W {list(dw)}"
    elif has_bias and tuple(A.tensor(bias).dims) != (dw[0],):
        why = f"linear bias must be [{dw[0]}], got {list(A.tensor(bias).dims)}"
    return x, w, (bias if has_bias else None), out, dx, dw, why


def lower_linear(L, call) -> None:
    x, w, bias, out, dx, dw, why = _linear_parse(L.args, call)
    if why:
        raise L.unsupported(why)
    N, K = dw
    M = max(1, L.tensor(x).numel // K) if K else 0
    # W is [N, K] row-major, so B[k, n] = W[n, k]: k is the unit stride.
    emit_matmul(L, "linear", x, w, out, batch=1, M=M, N=N, K=K,
                a_strides=(0, K, 1), b_strides=(0, 1, K), bias=bias, bias_axis="n")


def reference_linear(R, call) -> None:
    x, w, bias, out, dx, dw, why = _linear_parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    y = R.get(x).astype(np.float64) @ R.get(w).astype(np.float64).T
    if bias is not None:
        y = y + R.get(bias).astype(np.float64)
    R.set(out, y)


# -- aten.addmm.default: beta * bias + alpha * (mat1 @ mat2) ----------------------------------

def _addmm_parse(A, call):
    """(bias or None, mat1, mat2, out, M, K, N, bias axis, why-unsupported or None)."""
    bias, a, b, beta, alpha, out = call.args
    da, db, do = A.tensor(a).dims, A.tensor(b).dims, A.tensor(out).dims
    beta, alpha = A.float(beta), A.float(alpha)
    if len(da) != 2 or len(db) != 2 or da[1] != db[0] or tuple(do) != (da[0], db[1]):
        return (None, a, b, out, 0, 0, 0, "n",
                f"addmm needs [M,K] x [K,N] -> [M,N], got {list(da)} x {list(db)} -> {list(do)}")
    M, K = da
    N = db[1]
    # The bias broadcasts along rows ([N], [1, N]) or columns ([M, 1]); beta 0 drops it.
    db_ = tuple(A.tensor(bias).dims)
    axis = "n" if db_ in ((N,), (1, N)) else "m" if db_ == (M, 1) else None
    why = None
    if alpha != 1.0 or beta not in (0.0, 1.0):
        why = f"addmm with alpha={alpha}, beta={beta} (only alpha 1 and beta 0 or 1)"
    elif beta and axis is None:
        why = f"addmm bias {list(db_)} (only [{N}], [1, {N}] or [{M}, 1] broadcast)"
    return (bias if beta else None), a, b, out, M, K, N, axis, why


def lower_addmm(L, call) -> None:
    bias, a, b, out, M, K, N, axis, why = _addmm_parse(L.args, call)
    if why:
        raise L.unsupported(why)
    emit_matmul(L, "addmm", a, b, out, batch=1, M=M, N=N, K=K, a_strides=(0, K, 1),
                b_strides=(0, N, 1), bias=bias, bias_axis=axis)


def reference_addmm(R, call) -> None:
    bias, a, b, out, M, K, N, axis, why = _addmm_parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    y = R.get(a).astype(np.float64) @ R.get(b).astype(np.float64)
    if bias is not None:
        y = y + R.get(bias).astype(np.float64).reshape((1, N) if axis == "n" else (M, 1))
    R.set(out, y)


UNITS = [
    OpUnit(("aten.bmm.default",), lower_bmm, reference_bmm, {"aten.bmm.default": "T T T"}),
    OpUnit(("aten.linear.default",), lower_linear, reference_linear,
           {"aten.linear.default": "T T T? T"}),
    OpUnit(("aten.addmm.default",), lower_addmm, reference_addmm,
           {"aten.addmm.default": "T T T f f T"}),
]
