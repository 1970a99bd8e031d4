"""et_vk.sdpa.default: fused attention without a cache, `softmax(q @ k^T * scale + mask) @ v`.

Args: q [B,Hq,Sq,D], k, v [B,Hkv,Skv,D] (rank 3 [H,S,D] is B = 1), attn_mask Null or a
float32 tensor broadcast to [B,Hq,Sq,Skv] (added after scaling), scale Null|Double (default
1/sqrt(D)), out [B,Hq,Sq,D] (executorch 1.5.1 `backends/vulkan/custom_ops_lib.py` sdpa_impl).
Query head h reads kv head `h // (Hq/Hkv)`: Hkv == Hq is the op's plain form, Hkv == 1 the
broadcast its matmul allows, and other divisors the usual grouped-query reading. One
dispatch of the tiled online-softmax kernel of `_tiled.py`, so any Sq, Skv and D run.
"""

from __future__ import annotations

import math

from ...errors import PlanError
from .._np import np
from ..common import contiguous_strides
from ..registry import OpUnit
from ._tiled import Layout, fits_workgroup_memory, lower_attention, tiled_attention_reference

_NAME = "et_vk.sdpa.default"


def _dims4(dims) -> tuple[int, ...]:
    return (1,) * (4 - len(dims)) + tuple(dims)


def _layout(A, call) -> tuple[Layout, float]:
    """The kernel's layout and scale; raises ValueError saying what does not fit."""
    q, k, v, mask, scale_id, out = call.args
    dq, dk, dv = (tuple(A.tensor(x).dims) for x in (q, k, v))
    if not 3 <= len(dq) <= 4 or len(dk) != len(dq):
        raise ValueError(f"q {list(dq)} and k {list(dk)} must both be [B, H, S, D] or [H, S, D]")
    b, hq, sq, d = _dims4(dq)
    _, hkv, skv, _ = _dims4(dk)
    if _dims4(dk) != (b, hkv, skv, d) or dv != dk:
        raise ValueError(f"k {list(dk)} and v {list(dv)} must both be "
                         f"[{b}, Hkv, Skv, {d}] for q {list(dq)}")
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} kv heads")
    if tuple(A.tensor(out).dims) != dq:
        raise ValueError(f"out {list(A.tensor(out).dims)} must have the shape of q {list(dq)}")
    if min(sq, skv, d) < 1:
        raise ValueError(f"empty attention: q {list(dq)}, k {list(dk)}")
    strides = None
    if not A.is_null(mask):
        strides = _mask_strides(tuple(A.tensor(mask).dims), (b, hq, sq, skv))
    scale = A.optional_float(scale_id)
    lay = Layout(batch=b, hq=hq, hkv=hkv, seq=sq, d=d, s_div=1, h_div=sq,
                 kv_b=hkv * skv * d, kv_h=skv * d, kv_c=d, keys="fixed", skv=skv, mask=strides)
    return lay, 1.0 / math.sqrt(d) if scale is None else scale


def _mask_strides(dims: tuple[int, ...], full: tuple[int, ...]) -> tuple[int, int, int, int]:
    """Element strides of a mask broadcast (numpy rules) to `full`: 0 along broadcast dims."""
    if len(dims) > 4 or any(m not in (1, f) for m, f in zip(dims[::-1], full[::-1])):
        raise ValueError(f"attn_mask {list(dims)} does not broadcast to {list(full)}")
    padded = _dims4(dims)
    strides = contiguous_strides(padded)
    return tuple(0 if m == 1 else st for m, st in zip(padded, strides))


def lower(L, call) -> None:
    q, k, v, mask, _, out = call.args
    try:
        lay, scale = _layout(L.args, call)
    except ValueError as e:
        raise L.unsupported(str(e)) from None
    if not fits_workgroup_memory(lay.d):
        raise L.unsupported(f"head dim {lay.d} exceeds the 16 KiB of workgroup memory")
    tensors = (q, k, v, out) + (() if L.args.is_null(mask) else (mask,))
    if {L.storage(x) for x in tensors} != {"f32"}:
        raise L.unsupported("et_vk.sdpa runs on float32 tensors (and a float32 mask) only")
    lower_attention(L, lay, scale, L.buf(q), L.buf(k), L.buf(v), L.buf(out),
                    mask=None if lay.mask is None else L.buf(mask))


def reference(R, call) -> None:
    q, k, v, mask, _, out = call.args
    try:
        lay, scale = _layout(R.args, call)
    except ValueError as e:
        raise PlanError(f"{_NAME}: {e}") from None
    full = (lay.batch, lay.hq, lay.seq, lay.d)
    kv = (lay.batch, lay.hkv, lay.skv, lay.d)
    m = None if R.args.is_null(mask) else R.get(mask).reshape(_dims4(R.get(mask).shape))
    o = tiled_attention_reference(R.get(q).reshape(full), R.get(k).reshape(kv),
                                  R.get(v).reshape(kv), float(np.float32(scale)),
                                  np.full(lay.seq, lay.skv), m)
    R.set(out, o.reshape(R.args.tensor(out).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf T? f? Tf"})]
