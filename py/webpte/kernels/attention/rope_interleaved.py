"""et_vk.apply_rotary_emb_interleaved.default: pair-interleaved (complex-number) RoPE.

Args: x [..., N, C] with (real, imag) pairs interleaved along C (C even), freqs_cis of any
rank holding N*C elements, read as [N, C/2, (cos, sin)], out shaped as x. For each pair k
of row n: `out[2k] = x[2k]*cos - x[2k+1]*sin`, `out[2k+1] = x[2k]*sin + x[2k+1]*cos`
(executorch 1.5.1 `backends/vulkan/custom_ops_lib.py`); the table is shared by every
leading (batch) index. One invocation per pair.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit

_NAME = "et_vk.apply_rotary_emb_interleaved.default"


def _check(A, call) -> tuple[int, int]:
    """(number of pairs, table length N*C); raises ValueError saying what does not fit."""
    x, freqs, out = call.args
    tx, tf = A.tensor(x), A.tensor(freqs)
    if len(tx.dims) < 2 or tx.dims[-1] % 2:
        raise ValueError(f"x {list(tx.dims)} must be [..., N, C] with an even C")
    table = tx.dims[-2] * tx.dims[-1]
    if tf.numel != table or table == 0:
        raise ValueError(f"freqs_cis {list(tf.dims)} must hold N*C = {table} elements for "
                         f"x {list(tx.dims)}")
    if tuple(A.tensor(out).dims) != tuple(tx.dims):
        raise ValueError(f"out {list(A.tensor(out).dims)} must have the shape of x")
    return tx.numel // 2, table


def lower(L, call) -> None:
    x, freqs, out = call.args
    try:
        pairs, table = _check(L.args, call)
    except ValueError as e:
        raise L.unsupported(str(e)) from None
    if {L.storage(v) for v in call.args} != {"f32"}:
        raise L.unsupported("apply_rotary_emb_interleaved runs on float32 tensors only")
    wg, row = L.grid(pairs)
    k = L.kernel("attention/rope_interleaved", pairs=pairs, table=table, workgroup=256, row=row)
    L.dispatch(k, [L.buf(x), L.buf(freqs), L.buf(out)], wg)


def rope_interleaved_reference(x: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """x [..., N, C] rotated pair by pair with freqs [N*C] as (cos, sin) pairs, in float32."""
    pairs = x.reshape(-1, x.shape[-2] * x.shape[-1] // 2, 2)   # (batch, N*C/2, 2)
    cs = freqs.reshape(1, -1, 2)
    re, im, c, s = pairs[..., 0], pairs[..., 1], cs[..., 0], cs[..., 1]
    return np.stack([re * c - im * s, re * s + im * c], axis=-1).reshape(x.shape)


def reference(R, call) -> None:
    x, freqs, out = call.args
    try:
        _check(R.args, call)
    except ValueError as e:
        raise PlanError(f"{_NAME}: {e}") from None
    R.set(out, rope_interleaved_reference(R.get(x), R.get(freqs)))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf"})]
