"""et_vk.fused_ce.default: cross-entropy loss and its logits gradient in one op.

Args: logits f32 [N, V], labels int32 (or int64, narrowed to int32) with N elements,
n_valid Double, then the list (loss f32 with one element, dlogits f32 [N, V]). Semantics
(ExecuTorch `backends/vulkan/custom_ops_lib.py` `fused_ce_impl` and its WebGPU kernel), per
row r with label y = labels[r]:

    lse[r]        = log(sum_j exp(logits[r, j]))
    loss          = sum over rows with y >= 0 of (lse[r] - logits[r, y]) / n_valid
    dlogits[r, j] = (softmax(logits[r])[j] - (j == y)) / n_valid   (rows with y >= 0)

A negative label masks its row: no loss term, a dlogits row of zeros; with every row masked
the loss is 0. n_valid is the caller's count (normally the unmasked rows), not counted here.
A label >= V has no answer in ExecuTorch (torch raises, its WebGPU kernel reads past the
row): here that row's loss term and dlogits row are NaN, so the loss shows it. Refused:
logits that are not 2-D, dlogits of other dims, labels without N elements, a loss of more
than one element, n_valid <= 0 (as ExecuTorch refuses it), dtypes other than these.

Two dispatches: one workgroup per row takes the row's max, the sum of exp(x - max) and
writes the dlogits row and the row's loss term (a scratch buffer); one workgroup then sums
the terms. All f32; the numpy reference computes exp(x - max) in f32, sums each row's
exponentials and the loss terms in float64, rounding to f32.
"""

from __future__ import annotations

from .._np import np
from ..common import row_workgroup
from ..quantized.quantize import f32
from ..registry import OpUnit

__all__ = ["UNITS", "fused_ce_reference"]

_NAME = "et_vk.fused_ce.default"
MAX_WORKGROUP = 256
ELEMENTS_PER_INVOCATION = 32
F32_MAX = 3.4028234663852886e38  # the row max starts at the lowest finite f32
_QUIET_NAN = 0x7FC00000  # f32 bits, a params word: WGSL has no NaN constant


def _parse(A, call) -> dict:
    """Geometry of the call; raises UnsupportedOpError for forms not handled."""
    logits, labels, n_valid, outs = call.args
    tl, tlab = A.tensor(logits), A.tensor(labels)
    ids = A.value_list(outs)
    if len(ids) != 2:
        raise A.unsupported(call, f"{len(ids)} outputs: fused_ce returns (loss, dlogits)")
    loss, dlogits = ids
    if len(tl.dims) != 2 or 0 in tl.dims:
        raise A.unsupported(call, f"logits {list(tl.dims)}: only non-empty 2-D [N, V]")
    n, v = tl.dims
    if tuple(A.tensor(dlogits).dims) != (n, v):
        raise A.unsupported(call, f"dlogits {list(A.tensor(dlogits).dims)} differ from logits "
                                  f"{[n, v]}")
    if tlab.numel != n:
        raise A.unsupported(call, f"labels {list(tlab.dims)} should hold one label per row "
                                  f"({n})")
    if A.tensor(loss).numel != 1:
        raise A.unsupported(call, f"loss {list(A.tensor(loss).dims)}: only one element")
    nv = A.float(n_valid)
    if not nv > 0:
        raise A.unsupported(call, f"n_valid {nv}: only a positive count")
    return {"logits": logits, "labels": labels, "loss": loss, "dlogits": dlogits, "N": n,
            "V": v, "n_valid": nv}


def _strides(wg: int) -> list[int]:
    out, s = [], wg // 2
    while s:
        out.append(s)
        s //= 2
    return out


def lower(L, call) -> None:
    p = _parse(L.args, call)
    L.require_f32("fused_ce", (p["logits"], p["loss"], p["dlogits"]))
    if L.storage(p["labels"]) != "i32":
        raise L.unsupported(f"fused_ce takes int32 labels, not "
                            f"{L.tensor(p['labels']).dtype.name}")
    n, v = p["N"], p["V"]
    nv = L.params(f32(p["n_valid"]), _QUIET_NAN)
    terms = L.scratch(4 * n, "fused_ce_terms")
    wg = row_workgroup(v, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    groups, grid_row = L.grid(n, workgroup=1)
    rows = L.kernel("training/fused_ce", N=n, V=v, workgroup=wg, strides=_strides(wg),
                    grid_row=grid_row, lowest=-F32_MAX)
    L.dispatch(rows, [L.buf(p["logits"]), L.buf(p["labels"]), nv, L.buf(p["dlogits"]), terms],
               groups, cost={"bytes_read": 4 * n * (2 * v + 1), "macs": 0})
    wg = row_workgroup(n, ELEMENTS_PER_INVOCATION, MAX_WORKGROUP)
    total = L.kernel("training/fused_ce_sum", N=n, workgroup=wg, strides=_strides(wg))
    L.dispatch(total, [terms, L.buf(p["loss"])], (1, 1, 1), f"{call.name} (loss sum)",
               cost={"bytes_read": 4 * n, "macs": 0})


def fused_ce_reference(logits: np.ndarray, labels: np.ndarray,
                       n_valid: float) -> tuple[np.float32, np.ndarray]:
    """(loss, dlogits) with the kernel's arithmetic: logits (N, V) f32, labels (N,) ints."""
    f = np.float32
    n, v = logits.shape
    x = logits.astype(f)
    y = labels.astype(np.int64).reshape(n)
    nv = f(n_valid)
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=1, keepdims=True, dtype=np.float64).astype(f)
    lse = (m + np.log(s)).reshape(n)
    picked = x[np.arange(n), np.clip(y, 0, v - 1)]
    terms = (lse - picked) / nv
    grad = (e / s - (np.arange(v) == np.clip(y, 0, v - 1)[:, None]).astype(f)) / nv
    valid, over = y >= 0, y >= v
    terms = np.where(valid, np.where(over, f(np.nan), terms), f(0))
    grad = np.where(valid[:, None], np.where(over[:, None], f(np.nan), grad), f(0))
    return f(terms.sum(dtype=np.float64)), grad.astype(f)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    loss, grad = fused_ce_reference(R.get(p["logits"]), R.get(p["labels"]), p["n_valid"])
    R.set(p["loss"], np.full(R.args.tensor(p["loss"]).dims, loss, np.float32))
    R.set(p["dlogits"], grad)


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Ti f L"})]
