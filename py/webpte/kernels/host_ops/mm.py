"""aten.mm.default (the delegated Gemma 4 cache write's one-hot matmuls): [M, K] x [K, N]
on the shared tiled f32 matmul (matmul/matmul.py's `emit_matmul`), numpy reference in
float64 rounded to float32 as that family's."""

from __future__ import annotations

from .._np import np
from ..matmul.matmul import emit_matmul
from ..registry import OpUnit

_NAME = "aten.mm.default"


def _parse(A, call):
    a, b, out = call.args
    da, db, do = A.tensor(a).dims, A.tensor(b).dims, A.tensor(out).dims
    if len(da) != 2 or len(db) != 2 or da[1] != db[0] or tuple(do) != (da[0], db[1]):
        raise A.unsupported(call, f"mm needs [M,K] x [K,N] -> [M,N], got {list(da)} x "
                            f"{list(db)} -> {list(do)}")
    return a, b, out, da[0], da[1], db[1]


def lower(L, call) -> None:
    a, b, out, M, K, N = _parse(L.args, call)
    emit_matmul(L, "mm", a, b, out, batch=1, M=M, N=N, K=K, a_strides=(0, K, 1),
                b_strides=(0, N, 1))


def reference(R, call) -> None:
    a, b, out, *_ = _parse(R.args, call)
    R.set(out, np.matmul(R.get(a).astype(np.float64), R.get(b).astype(np.float64)))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf"})]
