"""Weights larger than one binding, split by output features.

WebGPU binds at most `max_storage_buffer_binding_size` bytes of a buffer to one binding (128
MiB by the specification's defaults, and on many adapters), so a 262 MB language-model head
cannot be one kernel's weight. This pass rewrites a linear whose constant weight W [N, ...]
is larger than the limit into linears over row blocks of W (each block a byte range of the
same file data, no copy at load), their per-output vectors (bias, int8 weight sums and
scales) cut alike, and one `cat` of the block outputs along the last dim. Each block is the
same op on fewer output features, so its results are the unsplit op's, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PlanError
from ..pte.graph import Graph, OpCall, TensorValue, ValueList
from .storage import storage_bytes

DEFAULT_BINDING = 134217728  # WebGPU's default max_storage_buffer_binding_size
_CAT = "aten.cat.default"


@dataclass(frozen=True)
class _Form:
    weight: int                 # arg index of W [N, ...]: one row per output feature
    per_out: tuple[int, ...]    # arg indices of [N] constants (or None) cut with W's rows


FORMS = {
    "aten.linear.default": _Form(1, (2,)),
    "et_vk.linear_q8ta_q8csw.default": _Form(3, (4, 5, 6)),
    "et_vk.linear_qcs4w.default": _Form(1, (2,)),
}


def split_large_weights(graph: Graph, binding_limit: int = DEFAULT_BINDING) -> Graph:
    """`graph` with every linear whose weight exceeds `binding_limit` bytes split into row
    blocks (module docstring); the graph itself when none does."""
    if not any(_too_large(graph, op, binding_limit) for op in graph.chain):
        return graph
    values = list(graph.values)
    constants = list(graph.constants)
    chain: list[OpCall] = []
    for op in graph.chain:
        if not _too_large(graph, op, binding_limit):
            chain.append(OpCall(op.name, op.args, len(chain)))
            continue
        form = FORMS[op.name]
        w = graph.tensor(op.args[form.weight])
        n = w.dims[0]
        rows = _block_rows(w, binding_limit)
        out = graph.tensor(op.args[-1])
        parts = []
        for start in range(0, n, rows):
            count = min(rows, n - start)
            args = list(op.args)
            args[form.weight] = _cut(values, constants, graph, op.args[form.weight], start, count)
            for i in form.per_out:
                if values[op.args[i]] is not None:
                    args[i] = _cut(values, constants, graph, op.args[i], start, count)
            values.append(TensorValue(out.dtype, out.dims[:-1] + (count,)))
            args[-1] = len(values) - 1
            parts.append(args[-1])
            chain.append(OpCall(op.name, tuple(args), len(chain)))
        values.append(ValueList(tuple(parts)))
        values.append(len(out.dims) - 1)
        chain.append(OpCall(_CAT, (len(values) - 2, len(values) - 1, op.args[-1]), len(chain)))
    return Graph(values=values, chain=chain, input_ids=list(graph.input_ids),
                 output_ids=list(graph.output_ids), constants=constants)


def _too_large(graph: Graph, op: OpCall, limit: int) -> bool:
    form = FORMS.get(op.name)
    if form is None or len(op.args) <= form.weight:
        return False
    w = graph.values[op.args[form.weight]]
    if not (isinstance(w, TensorValue) and w.is_constant and len(w.dims) >= 2 and w.dims[0] > 1):
        return False
    ref = graph.constants[w.constant_id]
    return storage_bytes(w) > limit and ref.nbytes == storage_bytes(w) and all(
        _cuttable(graph, op.args[i], w.dims[0]) for i in form.per_out)


def _cuttable(graph: Graph, vid: int, n: int) -> bool:
    """A per-output constant that can be cut by rows: absent, or a constant [N] stored as
    its file bytes."""
    v = graph.values[vid]
    if v is None:
        return True
    if not (isinstance(v, TensorValue) and v.is_constant and v.dims == (n,)):
        return False
    return graph.constants[v.constant_id].nbytes == storage_bytes(v)


def _block_rows(w: TensorValue, limit: int) -> int:
    """Rows per block: as many as fit the limit, a multiple of 4 (whole words per block of
    packed int8 rows of any length)."""
    per_row = storage_bytes(w) / w.dims[0]
    rows = int(limit // per_row) // 4 * 4
    if rows < 4:
        raise PlanError(f"one row of a {list(w.dims)} weight is {per_row:.0f} bytes; four "
                        f"rows do not fit a binding of {limit} bytes")
    return rows


def _cut(values: list, constants: list, graph: Graph, vid: int, start: int, count: int) -> int:
    """A new constant value: rows start..start+count of constant `vid` (a byte range)."""
    t = graph.tensor(vid)
    ref = graph.constants[t.constant_id]
    row = ref.nbytes // t.dims[0]
    constants.append(replace(ref, offset=ref.offset + start * row, nbytes=count * row))
    values.append(TensorValue(t.dtype, (count,) + t.dims[1:], len(constants) - 1))
    return len(values) - 1
