"""et_vk.adamw_step.default: one AdamW optimizer step, written in place.

Args: param, m, v, grad (f32, the same element count), lr, beta1, beta2, eps, weight_decay,
bias_correction1, bias_correction2 (Doubles), then the list of the three returned tensors.
Semantics (ExecuTorch `backends/vulkan/custom_ops_lib.py` `adamw_step_impl` and its WebGPU
kernel), elementwise, the bias corrections (1 - beta^t) computed by the caller:

    param = param * (1 - lr * weight_decay)
    m     = m * beta1 + (1 - beta1) * grad
    v     = v * beta2 + (1 - beta2) * grad * grad
    param = param - lr * (m / bias_correction1) / (sqrt(v / bias_correction2) + eps)

param, m and v are written in place (OpUnit.mutates): a later op that reads them reads the
new values (the planner's passes treat them as state: no op reading one is shared or moved
across the write). The returned tensors alias them as in ExecuTorch (they share their
buffers; where a buffer cannot be shared, the kernel writes the new values to the returned
tensor as well). A graph that reads a step's returned tensor after a later step wrote the
same tensor, or returns it, is refused: ExecuTorch would show the later values there, which
a copied returned tensor and the reference (each step's own values) do not. Like
update_cache's cache, a param, m or v that is the prepack of a constant is state of its
own, zero at load, kept across calls (the reference refuses non-zero data in it, so a
param exported with its values is not taken this way); a bare constant is refused (the
planner shares constant buffers), as are a zero bias correction (ExecuTorch refuses it),
param, m, v and grad that are not four distinct values, element counts that differ, and
dtypes other than f32.

The host folds the scalars to f32 (1 - lr * weight_decay, 1 - beta1, 1 - beta2 in double
first); the kernel and the numpy reference do each step above in f32.
"""

from __future__ import annotations

from ...pte.graph import ValueList
from .._np import np
from ..quantized.quantize import f32
from ..registry import OpUnit

__all__ = ["UNITS", "adamw_reference"]

_NAME = "et_vk.adamw_step.default"
WORKGROUP = 256
_SCALARS = ("lr", "beta1", "beta2", "eps", "weight_decay", "bias_correction1",
            "bias_correction2")


def _parse(A, call) -> dict:
    """The call's tensors and f32 scalars; raises UnsupportedOpError for forms not handled."""
    *tensors, outs = call.args[:4] + call.args[-1:]
    outs = A.value_list(outs)
    if len(outs) != 3:
        raise A.unsupported(call, f"{len(outs)} outputs: adamw_step returns (param, m, v)")
    if len(set(tensors)) != 4:
        raise A.unsupported(call, "param, m, v and grad must be four distinct values")
    numel = A.tensor(tensors[0]).numel
    for name, vid in zip(("param", "m", "v", "grad"), tensors):
        t = A.tensor(vid)
        if t.numel != numel or numel == 0:
            raise A.unsupported(call, f"{name} {list(t.dims)}: param, m, v and grad need the "
                                      f"same non-zero element count")
        if name != "grad" and t.is_constant:
            raise A.unsupported(call, f"{name} is a constant: a value written in place must "
                                      f"be an input, an activation or prepacked state")
    for vid in outs:
        if A.tensor(vid).numel != numel:
            raise A.unsupported(call, f"returned tensor {list(A.tensor(vid).dims)} does not "
                                      f"hold {numel} elements")
    s = dict(zip(_SCALARS, (A.float(v) for v in call.args[4:11]), strict=True))
    if s["bias_correction1"] == 0 or s["bias_correction2"] == 0:
        raise A.unsupported(call, "a bias correction of 0")
    words = (f32(s["lr"]), f32(s["beta1"]), f32(1 - s["beta1"]), f32(s["beta2"]),
             f32(1 - s["beta2"]), f32(s["eps"]), f32(1 - s["lr"] * s["weight_decay"]),
             f32(s["bias_correction1"]), f32(s["bias_correction2"]))
    if 0 in words[7:]:
        raise A.unsupported(call, "a bias correction that is 0 in float32")
    _refuse_stale_returns(A, call, tensors[:3], outs)
    return {"param": tensors[0], "m": tensors[1], "v": tensors[2], "grad": tensors[3],
            "outs": outs, "numel": numel, "words": words}


def _reads(graph, op) -> set[int]:
    """Value ids an op takes (a ValueList's members too), its outputs included."""
    ids = set(op.args)
    for a in op.args:
        if isinstance(graph.values[a], ValueList):
            ids.update(graph.values[a].ids)
    return ids


def _refuse_stale_returns(A, call, written, outs) -> None:
    """Refuse a graph that reads a tensor this step returned after a later step wrote the same
    tensor in place. In ExecuTorch the returned tensor is the written one (`Tensor(a!)`), so it
    would hold the later step's values; webpte shares the buffer only where it can (not with
    prepacked state) and its interpreter keeps each step's values: such a read is refused, not
    answered two ways."""
    graph = A.graph
    nodes = graph.nodes
    start = next((i for i, op in enumerate(nodes) if op is call), None)
    if start is None:
        return
    aliases = [{w, o} for w, o in zip(written, outs, strict=True)]
    later_write = [False] * 3
    for op in nodes[start + 1:]:
        ids = _reads(graph, op)
        for k, group in enumerate(aliases):
            if later_write[k] and outs[k] in ids:
                raise A.unsupported(call, f"tensor {outs[k]} it returned is read by "
                                          f"{op.name} after a later step wrote it in place")
            if op.name == _NAME and op.args[k] in group:
                later_write[k] = True
                group.add(A.value_list(op.args[-1])[k])
    for k, out in enumerate(outs):
        if later_write[k] and out in graph.output_ids:
            raise A.unsupported(call, f"tensor {out} it returned is an output of the method, "
                                      f"written in place again by a later step")


def lower(L, call) -> None:
    p = _parse(L.args, call)
    L.require_f32("adamw_step", (p["param"], p["m"], p["v"], p["grad"], *p["outs"]))
    state = [L.buf(p[k]) for k in ("param", "m", "v")]
    if len(set(state)) != 3 or L.buf(p["grad"]) in state:
        raise L.unsupported("param, m, v and grad share buffers")
    for out, name in zip(p["outs"], ("param", "m", "v"), strict=True):
        L.alias(out, p[name])   # the returned tensor shares the buffer where it may
    # returned tensors that could not share their buffer are written as well
    has_copy = [L.buf(o) != b for o, b in zip(p["outs"], state, strict=True)]
    copies = [L.buf(o) for o, c in zip(p["outs"], has_copy, strict=True) if c]
    n = p["numel"]
    groups, row = L.grid(n, WORKGROUP)
    kern = L.kernel("training/adamw_step", n=n, copy=has_copy, workgroup=WORKGROUP, row=row)
    L.dispatch(kern, [L.params(*p["words"]), L.buf(p["grad"]), *state, *copies], groups,
               cost={"bytes_read": 16 * n, "macs": 0})


def adamw_reference(param, m, v, grad, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(param, m, v) after one step, each step in f32 as the kernel does it; `words` the f32
    scalars lr, beta1, 1 - beta1, beta2, 1 - beta2, eps, 1 - lr * wd, bc1, bc2."""
    lr, b1, c1, b2, c2, eps, decay, bc1, bc2 = (np.float32(w) for w in words)
    g = grad.astype(np.float32)
    p = param.astype(np.float32) * decay
    m = m.astype(np.float32) * b1 + c1 * g
    v = v.astype(np.float32) * b2 + c2 * g * g
    p = p - lr * (m / bc1) / (np.sqrt(v / bc2) + eps)
    return p, m, v


def reference(R, call) -> None:
    p = _parse(R.args, call)
    vids = (p["param"], p["m"], p["v"])
    new = adamw_reference(*(R.get(x) for x in (*vids, p["grad"])), p["words"])
    for vid, out, arr in zip(vids, p["outs"], new, strict=True):
        R.set(vid, arr.reshape(R.args.tensor(vid).dims))
        R.set(out, arr.reshape(R.args.tensor(out).dims))


UNITS = [OpUnit((_NAME,), lower, reference, {_NAME: "Tf Tf Tf Tf f f f f f f f L"},
                mutates=(0, 1, 2))]
