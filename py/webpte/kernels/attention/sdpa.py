"""sdpa_with_kv_cache.default: write this call's K/V rows into persistent caches, then
causal grouped-query attention over the cache rows written so far.

Args: q [1,S,Hq,D], k, v [1,S,Hkv,D], k_cache, v_cache [1,ctx,Hkv,D] (zero constants
in the file; each gets its own persistent state buffer), start SymInt, seq_len Int (1),
attn_mask Null, dropout 0, is_causal Bool, scale Null|Double, out [1,S,Hq,D].

Semantics (executorch 1.5.1 `extension/llm/custom_ops` reference
`_sdpa_with_kv_cache_ref` and the Vulkan/WebGPU goldens): `cache[start+s] = k[s]`;
query row s of head h attends to cache rows `c < start+S` of kv head `h // (Hq/Hkv)`,
excluding `c > start+s` when causal; `softmax(q.k * scale) @ V`, scale 1/sqrt(D) by
default. The seq_len argument is not the row count: the Vulkan `causal_sdpa` pattern
(backends/vulkan/patterns/sdpa.py) rewrites custom_sdpa + update_cache with a literal 1
there, so S is q's dim 1 (as custom_sdpa uses it). Two dispatches: the cache write,
then the tiled online-softmax attention of `_tiled.py` over the cache rows, so any ctx
works. The start is read on the GPU per call; rows outside the cache are skipped and
clamped there. The reference refuses such a start.
"""

from __future__ import annotations

import math

from ...errors import InputError
from .._np import np
from ..registry import OpUnit
from ._tiled import (
    Layout,
    attention_variant,
    fits_workgroup_memory,
    lower_attention,
    tiled_attention_reference,
)

_NAME = "sdpa_with_kv_cache.default"


def _parse(A, call):
    (q, k, v, k_cache, v_cache, start, seq_len_id, mask, dropout_id, causal_id, scale_id,
     out) = call.args
    A.symint(start)
    A.int(seq_len_id)  # a placeholder: the row count comes from q (see the module doc)
    return dict(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, start=start,
                has_mask=not A.is_null(mask),
                dropout=A.float(dropout_id), causal=A.bool(causal_id),
                scale=A.optional_float(scale_id), out=out)


def _shapes(A, a) -> tuple[int, int, int, int, int]:
    """(S, Hq, Hkv, D, ctx) after checking every shape; raises ValueError with the reason."""
    dq, dk, dv = (tuple(A.tensor(a[n]).dims) for n in ("q", "k", "v"))
    dkc, dvc, do = (tuple(A.tensor(a[n]).dims) for n in ("k_cache", "v_cache", "out"))
    if len(dq) != 4 or len(dk) != 4 or dq[0] != 1:
        raise ValueError(f"q {list(dq)} and k {list(dk)} must be [1, S, H, D]")
    _, s, hq, d = dq
    hkv = dk[2]
    if dk != (1, s, hkv, d) or dv != dk:
        raise ValueError(f"k {list(dk)} and v {list(dv)} must be [1, {s}, Hkv, {d}]")
    if len(dkc) != 4 or dkc[0] != 1 or dkc[2:] != (hkv, d) or dvc != dkc:
        raise ValueError(f"caches {list(dkc)}, {list(dvc)} must both be [1, ctx, {hkv}, {d}]")
    if do != dq:
        raise ValueError(f"out {list(do)} must have the shape of q {list(dq)}")
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} kv heads")
    if dkc[1] < s:
        raise ValueError(f"a cache of {dkc[1]} rows cannot hold {s} new rows")
    return s, hq, hkv, d, dkc[1]


def _scale(a, d: int) -> float:
    """The score scale; the kernel and the reference both round it to f32."""
    return 1.0 / math.sqrt(d) if a["scale"] is None else a["scale"]


def lower(L, call) -> None:
    a = _parse(L.args, call)
    if a["has_mask"]:
        raise L.unsupported("an explicit attn_mask (only the causal form is supported)")
    if a["dropout"] != 0:
        raise L.unsupported(f"dropout {a['dropout']} (inference runs without dropout)")
    try:
        s, hq, hkv, d, ctx = _shapes(L.args, a)
    except ValueError as e:
        raise L.unsupported(str(e)) from None
    if not fits_workgroup_memory(d):
        raise L.unsupported(f"head dim {d} exceeds the 16 KiB of workgroup memory")
    names = ("q", "k", "v", "k_cache", "v_cache", "out")
    if {L.storage(a[n]) for n in names} != {"f32"}:
        raise L.unsupported("sdpa_with_kv_cache runs on float32 tensors only")
    start = L.buf(a["start"])
    kc, vc = L.state_buf(a["k_cache"]), L.state_buf(a["v_cache"])
    new_kv = (L.buf(a["k"]), L.buf(a["v"]))
    if attention_variant(L.features, d) != "serial":   # the serial kernel stores the rows itself
        n_write = s * hkv * d
        wg, row = L.grid(n_write)
        write = L.kernel("attention/sdpa_cache_write", seq=s, row_len=hkv * d, ctx=ctx,
                         n=n_write, workgroup=256, row=row)
        L.dispatch(write, [*new_kv, start, kc, vc], wg)
        new_kv = None
    # q [1,S,Hq,D]: row qi = s*Hq + h; cache row c of kv head g at (c*Hkv + g)*D.
    lay = Layout(batch=1, hq=hq, hkv=hkv, seq=s, d=d, s_div=hq, h_div=1, kv_b=0, kv_h=d,
                 kv_c=hkv * d, keys="causal" if a["causal"] else "cache", ctx=ctx)
    lower_attention(L, lay, _scale(a, d), L.buf(a["q"]), kc, vc, L.buf(a["out"]), start=start,
                    new_kv=new_kv)


def attention_reference(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, start: int,
                        scale: float, causal: bool) -> np.ndarray:
    """q [1,S,Hq,D] over cache rows [0, start+S) of [1,ctx,Hkv,D], as the kernel computes."""
    s = q.shape[1]
    n_keys = start + (np.arange(s) + 1 if causal else np.full(s, s))
    heads_first = (0, 2, 1, 3)  # [1,S,H,D] <-> [1,H,S,D]
    out = tiled_attention_reference(q.transpose(heads_first),
                                    k_cache[:, :start + s].transpose(heads_first),
                                    v_cache[:, :start + s].transpose(heads_first),
                                    scale, n_keys)
    return out.transpose(heads_first)


def reference(R, call) -> None:
    a = _parse(R.args, call)
    try:
        s, _, _, d, ctx = _shapes(R.args, a)
    except ValueError as e:
        raise InputError(f"{_NAME}: {e}") from None
    start = R.scalar(a["start"])
    if start < 0 or start + s > ctx:
        raise InputError(f"{_NAME}: rows {start}..{start + s - 1} are outside the "
                         f"{ctx}-row KV cache (input_pos + {s} must be <= {ctx})")
    kc, vc = R.persistent(a["k_cache"]), R.persistent(a["v_cache"])
    kc[0, start:start + s] = R.get(a["k"])[0]   # in place: the caches persist across runs
    vc[0, start:start + s] = R.get(a["v"])[0]
    R.set(a["out"], attention_reference(R.get(a["q"]), kc, vc, start,
                                        float(np.float32(_scale(a, d))),
                                        a["causal"]))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T T T T T Y i T? f b f? T"})]
