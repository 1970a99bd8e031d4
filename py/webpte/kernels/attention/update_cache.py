"""update_cache.default (llama::update_cache, ExecuTorch's extension/llm/custom_ops): write
a call's K or V rows into a KV cache in place.

Args: value f32 [B, S, H, D], cache f32 [B, C, H, D] (written in place), start_pos Int or
SymInt, out f32 (a [1] placeholder the op returns). `cache[b, start + s] = value[b, s]`
for every b and s (`update_cache_out`; ExecuTorch's WebGPU runtime runs B = 1 and a baked
Int); nothing else of the cache changes. The placeholder is written with zeros (the
reference kernel leaves it uninitialised). A cache that is a constant, or the prepack of
one (the partitioner's form of a registered buffer), is state of its own: zero at load
and reset, kept across calls (planner/lowering.py `state_buf`; the reference refuses
non-zero data in it). The start is read on the GPU (a SymInt's buffer, or a params
word); rows outside the cache are dropped there, and the reference refuses such a start.
"""

from __future__ import annotations

from ...errors import InputError, PlanError
from ...pte.graph import SymIntValue
from .._np import np
from ..registry import OpUnit

_NAME = "update_cache.default"


def _parse(A, call) -> dict:
    value, cache, start, out = call.args
    tv, tc = A.tensor(value), A.tensor(cache)
    if len(tv.dims) != 4 or len(tc.dims) != 4 or tv.dims[0] != tc.dims[0] \
            or tv.dims[2:] != tc.dims[2:]:
        raise A.unsupported(call, f"value {list(tv.dims)} and cache {list(tc.dims)} must be "
                                  f"[B, S, H, D] and [B, C, H, D]")
    b, s, h, d = tv.dims
    if s > tc.dims[1]:
        raise PlanError(f"{A.op_name}: {s} rows do not fit a cache of {tc.dims[1]}")
    symint = isinstance(A.graph.values[start], SymIntValue)
    return {"value": value, "cache": cache, "start": start, "out": out, "symint": symint,
            "pos": None if symint else A.int(start), "B": b, "S": s, "C": tc.dims[1],
            "row": h * d}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    if {L.storage(v) for v in (p["value"], p["cache"], p["out"])} != {"f32"}:
        raise L.unsupported("update_cache runs on float32 tensors only")
    if p["pos"] is not None and not 0 <= p["pos"] <= p["C"] - p["S"]:
        raise L.unsupported(f"start_pos {p['pos']} puts {p['S']} rows outside a cache of "
                            f"{p['C']}")
    cache = p["cache"]
    kc = L.state_buf(cache) if L.tensor(cache).is_constant else L.buf(cache)
    start = L.buf(p["start"]) if p["symint"] else L.params(p["pos"])
    n, n_out = p["B"] * p["S"] * p["row"], L.tensor(p["out"]).numel
    wg, row = L.grid(max(n, n_out))
    k = L.kernel("attention/update_cache", seq=p["S"], ctx=p["C"], row_len=p["row"], n=n,
                 n_out=n_out, workgroup=256, row=row)
    L.dispatch(k, [L.buf(p["value"]), start, kc, L.buf(p["out"])], wg)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    start, s, c = (R.scalar(p["start"]) if p["symint"] else p["pos"]), p["S"], p["C"]
    if not 0 <= start <= c - s:
        raise InputError(f"{_NAME}: rows {start}..{start + s - 1} are outside the {c}-row "
                         f"cache (start_pos + {s} must be <= {c})")
    cache = p["cache"]
    if R.args.tensor(cache).is_constant:
        if cache not in R.state and np.any(R.get(cache)):
            raise PlanError(f"{R.args.op_name}: the cache constant starts with non-zero "
                            "data; webpte starts caches at zero")
        R.persistent(cache)[:, start:start + s] = R.get(p["value"])  # state of its own
    else:
        arr = R.get(cache).copy()
        arr[:, start:start + s] = R.get(p["value"])
        R.set(cache, arr)
    R.set(p["out"], np.zeros(R.args.tensor(p["out"]).dims, np.float32))


def shape(values, call) -> dict:
    """The placeholder output keeps its dims whatever the value's row count."""
    return {}


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf * Tf"}, shape=shape,
                mutates=(1,))]
