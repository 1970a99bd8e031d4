"""Weights larger than one binding, split by output features.

WebGPU binds at most `max_storage_buffer_binding_size` bytes of a buffer to one binding (128
MiB by the specification's defaults, and on many adapters), so a 262 MB language-model head
cannot be one kernel's weight. This pass rewrites a linear whose constant weight W [N, ...]
is larger than the limit into linears over row blocks of W (each block a byte range of the
same file data, no copy at load), their per-output vectors (bias, int8 weight sums and
scales) cut alike, and one `cat` of the block outputs along the last dim. The 4-bit
group-wise linears keep scales (and weight sums) as [G, >= N] matrices, one row per group
along K: a block takes their columns, a constant of G strided runs of the file
(ConstantRef.pieces). Each block is the same op on fewer output features, so its results are
the unsplit op's, bit for bit.

An embedding table past the limit is split by rows (tokens) alike: block b gathers its rows
at the indices moved into it (clamped), and a `where` on `index >= first row of b` takes its
rows over the blocks before it; each output row is one table row, copied, as unsplit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PlanError
from ..kernels.storage import storage_bytes
from ..pte.graph import DType, Graph, OpCall, TensorValue, ValueList

DEFAULT_BINDING = 134217728  # WebGPU's default max_storage_buffer_binding_size
_CAT = "aten.cat.default"


@dataclass(frozen=True)
class _Form:
    weight: int                 # arg index of W [N, ...]: one row per output feature
    per_out: tuple[int, ...]    # arg indices of [N] constants (or None) cut with W's rows
    per_col: tuple[int, ...] = ()  # arg indices of [G, >= N] constants: cut by columns


FORMS = {
    "aten.linear.default": _Form(1, (2,)),
    "et_vk.linear_q8ta_q8csw.default": _Form(3, (4, 5, 6)),
    "et_vk.linear_qcs4w.default": _Form(1, (2,)),
    "et_vk.linear_q4gsw.default": _Form(1, (4,), (2,)),
    "et_vk.linear_dq8ca_q4gsw.default": _Form(3, (7,), (4, 5)),
}


@dataclass(frozen=True)
class _Embedding:
    table: int                  # arg index of the table [V, ...]: one row per token
    per_row: tuple[int, ...]    # arg indices of [V, ...] constants cut with the table's rows
    index: int                  # arg index of the token indices


EMBEDDINGS = {
    "aten.embedding.default": _Embedding(0, (), 1),
    "et_vk.embedding_q4gsw.default": _Embedding(0, (1,), 3),
}


def split_large_weights(graph: Graph, binding_limit: int = DEFAULT_BINDING) -> Graph:
    """`graph` with every linear whose weight, and every embedding whose table, exceeds
    `binding_limit` bytes split into row blocks (module docstring); the graph itself when
    none does."""
    values = list(graph.values)
    constants = list(graph.constants)
    chain: list[OpCall] = []
    split = False
    for op in graph.chain:
        if _table_too_large(graph, op, binding_limit):
            _split_embedding(graph, op, binding_limit, values, constants, chain)
        elif _too_large(graph, op, binding_limit):
            _split_linear(graph, op, binding_limit, values, constants, chain)
        else:
            chain.append(OpCall(op.name, op.args, len(chain)))
            continue
        split = True
    if not split:
        return graph
    return Graph(values=values, chain=chain, input_ids=list(graph.input_ids),
                 output_ids=list(graph.output_ids), constants=constants)


def _split_linear(graph: Graph, op: OpCall, limit: int, values: list, constants: list,
                  chain: list[OpCall]) -> None:
    """Row blocks of the weight (per-output vectors cut alike), one cat of their outputs."""
    form = FORMS[op.name]
    w = graph.tensor(op.args[form.weight])
    n = w.dims[0]
    rows = min([_block_rows(w, limit)]
               + [_block_rows(graph.tensor(op.args[i]), limit, by_columns=True)
                  for i in form.per_col])
    out = graph.tensor(op.args[-1])
    parts = []
    for start in range(0, n, rows):
        count = min(rows, n - start)
        args = list(op.args)
        args[form.weight] = _cut(values, constants, graph, op.args[form.weight], start, count)
        for i in form.per_out:
            if values[op.args[i]] is not None:
                args[i] = _cut(values, constants, graph, op.args[i], start, count)
        for i in form.per_col:
            args[i] = _cut_columns(values, constants, graph, op.args[i], start, count)
        values.append(TensorValue(out.dtype, out.dims[:-1] + (count,)))
        args[-1] = len(values) - 1
        parts.append(args[-1])
        chain.append(OpCall(op.name, tuple(args), len(chain)))
    values.append(ValueList(tuple(parts)))
    values.append(len(out.dims) - 1)
    chain.append(OpCall(_CAT, (len(values) - 2, len(values) - 1, op.args[-1]), len(chain)))


def _too_large(graph: Graph, op: OpCall, limit: int) -> bool:
    form = FORMS.get(op.name)
    if form is None or len(op.args) <= form.weight:
        return False
    w = graph.values[op.args[form.weight]]
    if not (isinstance(w, TensorValue) and w.is_constant and len(w.dims) >= 2 and w.dims[0] > 1):
        return False
    ref = graph.constants[w.constant_id]
    return (storage_bytes(w) > limit and ref.nbytes == storage_bytes(w) and ref.pieces == 1
            and all(_cuttable(graph, op.args[i], w.dims[0]) for i in form.per_out)
            and all(_column_cuttable(graph, op.args[i], w.dims[0]) for i in form.per_col))


def _table_too_large(graph: Graph, op: OpCall, limit: int) -> bool:
    form = EMBEDDINGS.get(op.name)
    if form is None or len(op.args) <= max(form.table, form.index, *form.per_row):
        return False
    ids = [form.table, *form.per_row]
    ts = [graph.values[op.args[i]] for i in ids]
    if not all(isinstance(t, TensorValue) and t.is_constant and len(t.dims) >= 2 for t in ts):
        return False
    rows = ts[0].dims[0]
    index, out = graph.values[op.args[form.index]], graph.values[op.args[-1]]
    if not (isinstance(index, TensorValue) and isinstance(out, TensorValue)
            and len(out.dims) == len(index.dims) + 1):
        return False
    return (rows > 4 and any(storage_bytes(t) > limit for t in ts)
            and all(t.dims[0] == rows and graph.constants[t.constant_id].nbytes
                    == storage_bytes(t) and graph.constants[t.constant_id].pieces == 1
                    for t in ts))


def _split_embedding(graph: Graph, op: OpCall, limit: int, values: list, constants: list,
                     chain: list[OpCall]) -> None:
    """Row blocks of the table, each gathering at its clamped indices, merged by `where`s."""
    form = EMBEDDINGS[op.name]
    rows = min(_block_rows(graph.tensor(op.args[i]), limit) for i in (form.table, *form.per_row))
    n = graph.tensor(op.args[form.table]).dims[0]
    index = op.args[form.index]
    it, out = graph.tensor(index), graph.tensor(op.args[-1])

    def new(value) -> int:
        values.append(value)
        return len(values) - 1

    def emit(name: str, *args: int) -> int:
        chain.append(OpCall(name, args, len(chain)))
        return args[-1]

    merged = None
    starts = list(range(0, n, rows))
    for start in starts:
        count = min(rows, n - start)
        moved = index
        if start:
            moved = emit("aten.add.Scalar", index, new(-start), new(None),
                         new(TensorValue(it.dtype, it.dims)))
        local = emit("aten.clamp.default", moved, new(0), new(count - 1),
                     new(TensorValue(it.dtype, it.dims)))
        args = list(op.args)
        for i in (form.table, *form.per_row):
            args[i] = _cut(values, constants, graph, op.args[i], start, count)
        args[form.index] = local
        last = start == starts[-1]
        if merged is None:
            args[-1] = new(TensorValue(out.dtype, out.dims))
            merged = emit(op.name, *args)
            continue
        args[-1] = new(TensorValue(out.dtype, out.dims))
        rows_b = emit(op.name, *args)
        inside = emit("aten.ge.Scalar", index, new(start),
                      new(TensorValue(DType.BOOL, it.dims)))
        inside = emit("aten.unsqueeze_copy.default", inside, new(len(it.dims)),
                      new(TensorValue(DType.BOOL, it.dims + (1,) * (len(out.dims) - len(it.dims)))))
        merged = emit("aten.where.self", inside, rows_b, merged,
                      op.args[-1] if last else new(TensorValue(out.dtype, out.dims)))


def _cuttable(graph: Graph, vid: int, n: int) -> bool:
    """A per-output constant that can be cut by rows: absent, or a constant [N] stored as
    its file bytes."""
    v = graph.values[vid]
    if v is None:
        return True
    if not (isinstance(v, TensorValue) and v.is_constant and v.dims == (n,)):
        return False
    ref = graph.constants[v.constant_id]
    return ref.nbytes == storage_bytes(v) and ref.pieces == 1


def _column_cuttable(graph: Graph, vid: int, n: int) -> bool:
    """A [G, >= N] constant of 4-byte elements stored as its file bytes: cut by columns."""
    v = graph.values[vid]
    if not (isinstance(v, TensorValue) and v.is_constant and len(v.dims) == 2
            and v.dims[1] >= n and v.dtype in (DType.FLOAT32, DType.INT32)):
        return False
    ref = graph.constants[v.constant_id]
    return ref.nbytes == storage_bytes(v) == 4 * v.numel and ref.pieces == 1


def _block_rows(w: TensorValue, limit: int, by_columns: bool = False) -> int:
    """Rows (output features) per block: as many as fit the limit, a multiple of 4 (whole
    words per block of packed int8 rows of any length); `by_columns`: w's columns are the
    features (a [G, >= N] matrix of 4-byte elements)."""
    per_row = 4 * w.dims[0] if by_columns else storage_bytes(w) / w.dims[0]
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


def _cut_columns(values: list, constants: list, graph: Graph, vid: int, start: int,
                 count: int) -> int:
    """A new constant value: columns start..start+count of the [G, C] constant `vid` (G
    strided runs of the file)."""
    t = graph.tensor(vid)
    ref = graph.constants[t.constant_id]
    g, c = t.dims
    constants.append(replace(ref, offset=ref.offset + 4 * start, nbytes=4 * g * count,
                             pieces=g, stride=4 * c))
    values.append(TensorValue(t.dtype, (g, count), len(constants) - 1))
    return len(values) - 1
