"""torchao.choose_qparams_affine.default: per-block scale and zero point of an f32 tensor.

Args: x f32, mapping type (String), block_size (IntList), target dtype, quant_min,
quant_max, eps (Double or Null: f32's smallest normal), scale dtype, zero-point dtype,
keepdim, then the outputs (scale f32, zero point int8/uint8/int32) as a ValueList.

Semantics are torchao's `_choose_qparams_affine` (`torchao/quantization/quant_primitives.py`),
in f32 as torch computes them:
    mn = min(min(block), 0), mx = max(max(block), 0)
    ASYMMETRIC: scale = max((mx - mn) / f32(qmax - qmin), eps)
                zp    = clamp(qmin - round_half_even(mn / scale), qmin, qmax)
    SYMMETRIC:  scale = max(max(-mn, mx) / f32((qmax - qmin) / 2), eps)
                zp    = int((qmax + qmin + 1) / 2)
Every division is correctly rounded on the GPU as well (shaders/quantized/_exact_div.wgsl.j2),
so scale and zero point equal torch's bit for bit. Blocks must be contiguous runs of x
(block_size (1, ..., 1, b, full, ..., full)): per tensor, per row, per group of a row.
"""

from __future__ import annotations

from .._np import np
from ..common import row_workgroup
from ..registry import OpUnit
from ..storage import storage_of
from .quantize import f32

__all__ = ["UNITS", "choose_qparams_reference"]

NAME = "torchao.choose_qparams_affine.default"
SMALLEST_NORMAL = 2.0 ** -126  # torch.finfo(torch.float32).smallest_normal, the default eps
_ZP_KINDS = ("i8", "u8", "i32")


def _parse(A, call) -> dict:
    """The op's geometry and constants; raises UnsupportedOpError for forms not handled."""
    x, mapping, block, _target, qmin, qmax, eps, _sdt, _zdt, _keepdim, outs = call.args
    mapping, block = A.str(mapping), A.ints(block)
    qmin, qmax = A.int(qmin), A.int(qmax)
    eps = SMALLEST_NORMAL if A.is_null(eps) else A.float(eps)
    ids = A.value_list(outs)
    if len(ids) != 2:
        raise A.unsupported(call, f"expects two outputs (scale, zero point), got {len(ids)}")
    scale, zp = ids
    dims = tuple(A.tensor(x).dims)
    if mapping not in ("ASYMMETRIC", "SYMMETRIC"):
        raise A.unsupported(call, f"mapping type {mapping!r} (only ASYMMETRIC and SYMMETRIC)")
    if len(block) != len(dims) or any(b <= 0 or d % b for b, d in zip(block, dims)):
        raise A.unsupported(call, f"block size {list(block)} does not tile x {list(dims)}")
    split = next((i for i, b in enumerate(block) if b != 1), len(block))
    if any(block[j] != dims[j] for j in range(split + 1, len(dims))):
        raise A.unsupported(call, f"block size {list(block)} of x {list(dims)}: blocks must "
                                  "be contiguous (after the first dim > 1, whole dims)")
    length = 1
    for b in block:
        length *= b
    n_blocks = A.tensor(x).numel // length if length else 0
    ts, tz = A.tensor(scale), A.tensor(zp)
    if n_blocks == 0 or ts.numel != n_blocks or tz.numel != n_blocks:
        raise A.unsupported(call, f"{n_blocks} blocks, but scale {list(ts.dims)} and zero "
                                  f"point {list(tz.dims)}")
    if storage_of(ts) != "f32" or storage_of(tz) not in _ZP_KINDS:
        raise A.unsupported(call, f"scale {ts.dtype.name}, zero point {tz.dtype.name} (needs "
                                  "float32 and int8/uint8/int32)")
    if not qmin < qmax < (1 << 24) or qmin <= -(1 << 24):
        raise A.unsupported(call, f"quant range [{qmin}, {qmax}]")
    if not f32(eps) >= SMALLEST_NORMAL:
        raise A.unsupported(call, f"eps {eps} below f32's smallest normal")
    return {"x": x, "scale": scale, "zp": zp, "mapping": mapping, "qmin": qmin,
            "qmax": qmax, "eps": f32(eps), "block": length, "n_blocks": n_blocks,
            "sym_zp": int((qmax + qmin + 1) / 2)}


def lower(L, call) -> None:
    p = _parse(L.args, call)
    wg = row_workgroup(p["block"], 4)
    groups = -(-p["n_blocks"] // 4)  # one packed zero-point word per workgroup
    grid, row = L.grid(groups * wg, wg)
    kern = L.kernel("quantized/choose_qparams", mapping=p["mapping"], n_blocks=p["n_blocks"],
                    block=p["block"], qmin=p["qmin"], qmax=p["qmax"], eps=p["eps"],
                    sym_zp=p["sym_zp"], zp_kind=L.storage(p["zp"]), workgroup=wg,
                    groups_x=row // wg)
    L.dispatch(kern, [L.buf(p["x"]), L.buf(p["scale"]), L.buf(p["zp"])], grid)


def choose_qparams_reference(blocks: np.ndarray, mapping: str, qmin: int, qmax: int,
                             eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(scale f32, zero point f32 of integers) per row of `blocks` (n_blocks, length)."""
    f = np.float32
    mn = np.minimum(blocks.min(axis=1), f(0))
    mx = np.maximum(blocks.max(axis=1), f(0))
    if mapping == "ASYMMETRIC":
        scale = np.maximum((mx - mn) / f(qmax - qmin), f(eps))
        zp = np.clip(f(qmin) - np.round(mn / scale), f(qmin), f(qmax))
    else:
        scale = np.maximum(np.maximum(-mn, mx) / f((qmax - qmin) / 2), f(eps))
        zp = np.full_like(scale, f(int((qmax + qmin + 1) / 2)))
    return scale.astype(f), zp.astype(f)


def reference(R, call) -> None:
    p = _parse(R.args, call)
    blocks = R.get(p["x"]).astype(np.float32).reshape(p["n_blocks"], p["block"])
    scale, zp = choose_qparams_reference(blocks, p["mapping"], p["qmin"], p["qmax"], p["eps"])
    R.set(p["scale"], scale.reshape(R.args.tensor(p["scale"]).dims))
    R.set(p["zp"], zp.astype(np.int32).reshape(R.args.tensor(p["zp"]).dims))


UNITS = [OpUnit((NAME,), lower, reference, {NAME: "Tf s I * i i f? * * b L"})]
