"""aten.arange.start_step (and the portable kernel's `arange.start_out(start, end, step,
out)`): `start + i * step` for i in [0, numel), the output's dtype.

Integer outputs are exact in i32. Float outputs take start and step as f32 and compute
`start + f32(i) * step` in f32; torch accumulates in double, so only forms whose every
value that formula gives exactly (integral start and step, |values| <= 2^24) are taken.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit
from ..storage import WGSL_TYPE, storage_of

_NAME = "aten.arange.start_step"
_OUT = "aten.arange.start_out"
_EXACT = 1 << 24


def _parse(A, call) -> tuple[int, float, float, str]:
    start, end, step, *_opts, out = call.args
    lo, hi, st = (A.graph.values[v] for v in (start, end, step))
    if any(type(v) not in (int, float) for v in (lo, hi, st)) or st == 0:
        raise A.unsupported(call, f"arange({lo!r}, {hi!r}, {st!r}) needs numbers, step != 0")
    t = A.tensor(out)
    n = t.numel
    if len(t.dims) != 1 or n != max(0, -(-(hi - lo) // st)):
        raise A.unsupported(call, f"arange({lo}, {hi}, {st}) for an output of dims "
                            f"{list(t.dims)}")
    kind = storage_of(t)
    if kind in ("i8", "u8", "bool"):
        raise A.unsupported(call, f"arange into a {t.dtype.numpy_name} tensor")
    ty = "f32" if kind == "f32" else "i32"
    if any(float(v) != int(v) for v in (lo, st)):
        raise A.unsupported(call, "arange with a non-integral start or step")
    last = lo + (n - 1) * st
    if max(abs(lo), abs(last)) > (_EXACT if ty == "f32" else (1 << 31) - 1):
        raise A.unsupported(call, f"arange values up to {last} are not exact in {ty}")
    return out, int(lo), int(st), ty


def lower(L, call) -> None:
    out, start, step, ty = _parse(L.args, call)
    t = L.tensor(out)
    wg, row = L.grid(t.numel)
    words = (float(start), float(step)) if ty == "f32" else (start, step)
    k = L.kernel("host_ops/arange", n=t.numel, ty=ty, out_kind=L.storage(out),
                 out_wgsl=WGSL_TYPE[L.storage(out)], workgroup=256, row=row)
    L.dispatch(k, [L.params(*words), L.buf(out)], wg)


def reference(R, call) -> None:
    out, start, step, ty = _parse(R.args, call)
    n = R.args.tensor(out).numel
    i = np.arange(n, dtype=np.int64)
    v = (np.float32(start) + i.astype(np.float32) * np.float32(step) if ty == "f32"
         else (start + i * step).astype(np.int32))
    R.set(out, v)


UNITS = [OpUnit((_NAME, _OUT), lower, reference, {_NAME: "f f f * * * b? T", _OUT: "f f f T"})]
