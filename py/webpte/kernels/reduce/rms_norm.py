"""et_vk.rms_norm.default: `x * rsqrt(mean(x^2) + eps) * w` over the last dim.

One workgroup per row: each invocation sums squares over a strided slice, a tree
reduction in workgroup memory gives the row's sum (`norm:redundant`, CPU adapters: a
workgroup of 8 whose invocations each form all 8 partials and the tree, no barrier; where the
device has subgroups, each partial formed by one lane of each subgroup and the tree's last
steps taken across lanes with subgroupShuffleDown: the same adds, bitwise). An
elementwise chain reading only the normed tensor (the decoder's pass-1 quantize and pass-2
error chain) may run in the same dispatch (`lower_chain`, planned by planner/fusion.py), the
normed tensor never stored. The reference accumulates the sum of squares in float64 and
applies the scale in float32, as the kernel does.
"""

from __future__ import annotations

from .._np import np
from ..registry import OpUnit
from ..storage import storage_of

_NAME = "et_vk.rms_norm.default"
MAX_GROUPS = 65535  # rows beyond this fold into workgroup y
# Planner hint (CPU adapters): every invocation forms the row's partial sums and tree itself,
# no barrier. The norm and its fused chains take the same form, so they stay bitwise equal to
# each other (not to the 32-256-wide workgroup form, which adds other partials).
NORM_REDUNDANT = "norm:redundant"
REDUNDANT_WORKGROUP = 8   # one SIMD batch of a CPU adapter: 8 partial sums, each formed 8 times
NORM_SHUFFLE_OFF = "norm_shuffle:off"   # the redundant form without subgroups (norm_form)


def norm_form(d: int, features) -> dict:
    """The kernel's reduction parameters for these features: `workgroup_size`, the redundant
    form, and its subgroup form (`shuffle`: where the device has subgroups, bitwise the
    redundant one with each partial formed once a subgroup rather than once a lane; on
    SmolLM2's window the 61 norm chains 1.9x faster on lavapipe, 1.5x on SwiftShader;
    `norm_shuffle:off` keeps the loop)."""
    from ..quantized.linear_q8 import SUBGROUPS_FEATURE, SUBGROUPS_IMPLICIT

    redundant = NORM_REDUNDANT in features
    shuffle = redundant and SUBGROUPS_FEATURE in features and NORM_SHUFFLE_OFF not in features
    return {"workgroup": workgroup_size(d, features), "redundant": redundant,
            "shuffle": shuffle, "enable_subgroups": SUBGROUPS_IMPLICIT not in features}


def workgroup_size(d: int, features=()) -> int:
    """A power of two in [32, 256] covering the row where possible; REDUNDANT_WORKGROUP with
    the `norm:redundant` hint (the rms_norm and its fused chains alike, so both add the same
    partials)."""
    if NORM_REDUNDANT in features:
        return REDUNDANT_WORKGROUP
    n = 32
    while n < d and n < 256:
        n *= 2
    return n


def _parse(A, call):
    x, w, eps_id, out = call.args
    return x, w, A.float(eps_id), out


def _check(A, x, w, out) -> str | None:
    """Why the kernel cannot run this call, or None."""
    tx, tw, to = A.tensor(x), A.tensor(w), A.tensor(out)
    if not tx.dims:
        return "rms_norm of a 0-d tensor"
    d = tx.dims[-1]
    if tuple(tw.dims) != (d,) or tuple(to.dims) != tuple(tx.dims):
        return (f"x {list(tx.dims)}, weight {list(tw.dims)}, out {list(to.dims)}: "
                f"weight must be [{d}] and out the shape of x")
    if {storage_of(A.tensor(v)) for v in (x, w, out)} != {"f32"}:
        return "rms_norm runs on float32 tensors only"
    return None


def _grid(A, x) -> tuple[int, int, tuple[int, int, int]]:
    """(d, rows, workgroups): one workgroup per row."""
    tx = A.tensor(x)
    d = tx.dims[-1]
    rows = max(1, tx.numel // max(d, 1))
    return d, rows, (min(rows, MAX_GROUPS), -(-rows // MAX_GROUPS), 1)


def lower(L, call) -> None:
    x, w, eps, out = _parse(L.args, call)
    why = _check(L.args, x, w, out)
    if why:
        raise L.unsupported(why)
    d, rows, groups = _grid(L.args, x)
    k = L.kernel("reduce/rms_norm", d=d, rows=rows, eps=eps, group_row=MAX_GROUPS,
                 **norm_form(d, L.features))
    L.dispatch(k, [L.buf(x), L.buf(w), L.buf(out)], groups)


def chain_fits(A, call, packed: bool) -> bool:
    """Whether an elementwise chain on this call's output can run in its kernel
    (`lower_chain`): a supported call whose rows are whole output words when packed."""
    x, w, _, out = _parse(A, call)
    return _check(A, x, w, out) is None and (not packed or A.tensor(x).dims[-1] % 4 == 0)


def lower_chain(L, call, code: dict, outputs: list[dict], ops: str, packed: bool) -> None:
    """One dispatch: the norm of each row, then the fused chain (plan/fusion.chain_code's
    `code`, reading the normed value as register `nv`) on each element, writing `outputs`
    (fusion.lower_group's) instead of the normed tensor."""
    x, w, eps, _ = _parse(L.args, call)
    d, rows, groups = _grid(L.args, x)
    inputs = [(f"a{j}", ty, "read") for j, ty in enumerate(code["wgsl"])] + [("p", "u32", "read")]
    k = L.kernel("fused/rms_norm_chain", d=d, rows=rows, eps=eps, group_row=MAX_GROUPS,
                 **norm_form(d, L.features), ops=ops,
                 inputs=inputs, outputs=outputs, packed=packed,
                 externals=code["externals"], steps=code["steps"], zero=code["zero"])
    bufs = [L.buf(x), L.buf(w)] + code["bufs"] + [L.params(*code["words"])]
    L.dispatch(k, bufs + [L.buf(o["value"]) for o in outputs], groups, label=f"fused:{ops}")


def reference(R, call) -> None:
    x, w, eps, out = _parse(R.args, call)
    xv = R.get(x).astype(np.float32)
    ms = np.mean(np.square(xv.astype(np.float64)), axis=-1, keepdims=True)
    r = (1.0 / np.sqrt(ms + np.float64(np.float32(eps)))).astype(np.float32)
    R.set(out, (xv * r) * R.get(w).astype(np.float32))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "T T f T"})]
