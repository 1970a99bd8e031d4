"""Fusing the two passes of a two-pass int8 linear into one kernel that reads W once.

The decoder recipe (tools/decoder_model.py, TwoPassQ8Linear) computes
    y = linear_q8(q8(x; s1, z1), W) + linear_q8(q8(x - fq8(x); s2, z2), W)
with one int8 W: two `linear_q8ta_q8csw` calls on the same weight, sums and scales, whose
outputs meet in one `aten.add.Tensor`. A pair is fused when both outputs are used only
by that add (and are not method outputs), which also means neither linear's input can
depend on the other's output. The dispatch takes the add's place in the chain; the two
linears plan nothing. Each accumulator is dequantized exactly as linear_q8_skinny does,
then combined with the add's own element expression, so the result is bit-identical to
the three separate dispatches.

Covered: int8 inputs; up to SKINNY_ROWS rows (decoder windows) one column per invocation,
more rows (the vision tower) in workgroup tiles (linear_q8_dual_tiled: each staged W word
serves both passes). Float inputs (in-kernel quantization) and pairs with two different bias
constants stay unfused.

Epilogue: when the nodes after the add are elementwise ops on the sum (the decoder's
residual add, the MLP's silu), and every value but the last is read by those nodes alone,
they run in the dual kernel after the add, as a fused elementwise group would
(`_elementwise.wgsl.j2`'s `chain`), and the dispatch moves to the chain's root. The
chain's other inputs have the sum's element count (read at the same flat index) or one
element; they take the bindings left under MAX_BINDINGS, and the chain stops before an op
that would need more, or whose result is packed int8 (one invocation per column cannot
write whole words).

Ordering with the elementwise pass (fusion.py): pairs are found first, and their adds and
epilogues are withheld from elementwise groups (they break a run); everything else groups
as before, including the chains that produce the second pass's input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PlanError, UnsupportedOpError
from ..kernels.common import Args
from ..kernels.element import Element
from ..kernels.elementwise.binary import element as add_element
from ..kernels.quantized.linear_q8 import (
    DECODE_VARIANTS,
    DOT4_FEATURE,
    SKINNY_ROWS,
    decode_variant,
    gemm_variant,
    linear_cost,
    splitk_kernel,
    tiling,
)
from ..kernels.quantized.linear_q8 import NAME as LINEAR
from ..kernels.quantized.quantize import f32
from ..pte.graph import Graph, TensorValue
from .fusion import MAX_BINDINGS, Uses, _element, chain_code
from .storage import PACKED, WGSL_TYPE, constant_key, storage_of

ADD = "aten.add.Tensor"


@dataclass(frozen=True)
class DualLinear:
    """Two linear nodes sharing W, in the add's operand order, fused at the add node."""

    linears: tuple[int, int]
    add: int
    m: int
    n: int
    k: int
    add_element: dict  # the add's element spec (shaders/_elementwise.wgsl.j2)
    epilogue: dict[int, Element] = field(default_factory=dict)  # chain nodes after the add
    epilogue_inputs: tuple[int, ...] = ()   # the chain's values other than its own

    @property
    def root(self) -> int:
        """The node whose value the dispatch writes, where it takes its place."""
        return max(self.epilogue, default=self.add)


def _buffer_key(graph: Graph, vid: int):
    """Values with equal keys share one buffer in the plan (a constant under different value
    ids: Lowering.buf's `constant_key`)."""
    v = graph.values[vid]
    if isinstance(v, TensorValue) and v.is_constant:
        return ("const", *constant_key(graph, v))
    return ("value", vid)


def _linear_shape(graph: Graph, call) -> tuple[int, int, int] | None:
    """(M, N, K) of a linear the dual kernel can run; None otherwise."""
    if len(call.args) != 8:
        return None
    x, _s, zp, w, sums, scales, bias, out = call.args
    tx, tw, to = (graph.values[v] for v in (x, w, out))
    if not all(isinstance(t, TensorValue) for t in (tx, tw, to)) or len(tw.dims) != 2:
        return None
    n, k = tw.dims
    if (not tx.dims or tx.dims[-1] != k or tuple(to.dims) != (*tx.dims[:-1], n) or k % 4
            or k == 0 or storage_of(tx) != "i8" or storage_of(tw) != "i8"
            or storage_of(to) != "f32"):
        return None
    m = tx.numel // k
    try:
        zero_point = Args(graph).int(zp)
    except PlanError:
        return None
    if m <= 0 or not -256 <= zero_point <= 255:
        return None
    for vid, kind in ((sums, "i32"), (scales, "f32")) + (
            ((bias, "f32"),) if graph.values[bias] is not None else ()):
        t = graph.values[vid]
        if not isinstance(t, TensorValue) or storage_of(t) != kind or t.numel < n:
            return None
    return m, n, k


def _epilogue(graph: Graph, add: int, numel: int, uses: Uses,
              room: int) -> tuple[dict[int, Element], tuple[int, ...]]:
    """The elementwise nodes after the add that the dual kernel can evaluate, and their
    other inputs: consecutive nodes, each reading a value the kernel holds (the sum or an
    earlier node's); the longest such run whose held values, all but the last, are read by
    the run alone (silu: x * sigmoid(x) reads the sum twice)."""
    chain: dict[int, Element] = {}
    external: list[int] = []
    made = {graph.chain[add].args[-1]: add}   # held value -> the node that makes it
    best: tuple[dict[int, Element], tuple[int, ...]] = ({}, ())
    for node in range(add + 1, len(graph.chain)):
        e = _element(graph, node)
        if (e is None or not any(v in made for v in e.inputs)
                or graph.tensor(e.out).numel != numel
                or storage_of(graph.values[e.out]) in PACKED):
            break
        ext = list(dict.fromkeys(external + [v for v in e.inputs if v not in made]))
        if len(ext) > room:
            break
        chain[node], external, made[e.out] = e, ext, node
        if all(_read_within(graph, uses, v, [add, *chain]) for v in made if v != e.out):
            best = (dict(chain), tuple(external))
    return best


def _read_within(graph: Graph, uses: Uses, vid: int, nodes: list[int]) -> bool:
    """Whether every appearance of `vid` (its maker's out arg included) is among `nodes`'
    args, and it is no method input or output: the kernel may keep it in registers."""
    return vid not in uses.io and uses.counts.get(vid, 0) == sum(
        graph.chain[n].args.count(vid) for n in nodes)


def find_dual_linears(graph: Graph, uses: Uses) -> dict[int, DualLinear]:
    """Fusable pairs keyed by their root node (the add, or its epilogue's last node)."""
    producer = {op.args[-1]: node for node, op in enumerate(graph.chain) if op.name == LINEAR}
    pairs: dict[int, DualLinear] = {}
    for node, op in enumerate(graph.chain):
        if op.name != ADD or len(op.args) != 4:
            continue
        a, b = op.args[0], op.args[1]
        nodes = (producer.get(a), producer.get(b))
        if a == b or None in nodes or not (uses.passed_once(a) and uses.passed_once(b)):
            continue
        calls = [graph.chain[n] for n in nodes]
        shapes = [_linear_shape(graph, c) for c in calls]
        if None in shapes or shapes[0] != shapes[1]:
            continue
        if any(_buffer_key(graph, calls[0].args[i]) != _buffer_key(graph, calls[1].args[i])
               for i in (3, 4, 5)):
            continue   # not the same weight
        biases = {_buffer_key(graph, c.args[6]) for c in calls
                  if graph.values[c.args[6]] is not None}
        if len(biases) > 1:
            continue   # two bias bindings would exceed MAX_BINDINGS
        t_out = graph.values[op.args[3]]
        if storage_of(t_out) != "f32" or tuple(t_out.dims) != tuple(graph.values[a].dims):
            continue
        try:
            e = add_element(Args(graph, f"{op.name} (node {node})"), op)
        except (UnsupportedOpError, PlanError):
            continue
        m, n, k = shapes[0]
        room = MAX_BINDINGS - (5 + len(biases) + 2)   # x, x, w, sums, scales, bias; p, out
        pair = DualLinear(nodes, node, m, n, k, e.spec(),
                          *_epilogue(graph, node, m * n, uses, room))
        pairs[pair.root] = pair
    return pairs


def lower_dual_linear(L, pair: DualLinear) -> None:
    """One dispatch: both passes' accumulators per output column, W read once."""
    calls = [L.graph.chain[n] for n in pair.linears]
    xs, ws, sums, scales = ([c.args[i] for c in calls] for i in (0, 3, 4, 5))
    bias_ids = [c.args[6] for c in calls]
    has_bias = [L.graph.values[v] is not None for v in bias_ids]
    bias_buf = next((L.buf(v) for v, h in zip(bias_ids, has_bias) if h), None)
    bufs = [L.buf(xs[0]), L.buf(xs[1]), L.buf(ws[0]), L.buf(sums[0]), L.buf(scales[0])]
    if bias_buf is not None:
        bufs.append(bias_buf)
    params = []
    for c in calls:
        params += [f32(L.args.float(c.args[1])), L.args.int(c.args[2])]
    epilogue, label = None, "fused:linear_q8+linear_q8+add"
    out = L.graph.chain[pair.add].args[3]
    if pair.epilogue:
        code = chain_code(L, list(pair.epilogue), pair.epilogue, list(pair.epilogue_inputs),
                          {out: "y"}, pair.m * pair.n, at=len(params))
        root = pair.epilogue[pair.root]
        out = root.out
        epilogue = {"inputs": [(f"a{j}", ty, "read") for j, ty in enumerate(code["wgsl"])],
                    "externals": code["externals"], "steps": code["steps"], "ty": root.ty,
                    "out_kind": L.storage(out), "out_wgsl": WGSL_TYPE[L.storage(out)],
                    "ops": "+".join(e.op for e in pair.epilogue.values())}
        bufs += code["bufs"]
        params += code["words"]
        epilogue["zero_word"] = code["zero"]   # the opaque zero of `stored` and the chain
        label += "+" + epilogue["ops"]
    if pair.m > SKINNY_ROWS and not pair.epilogue:
        params.append(0)   # the opaque zero of the tiled kernel's `stored`
    bufs += [L.params(*params), L.buf(out)]
    if len(bufs) > MAX_BINDINGS:
        raise PlanError(f"dual linear at node {pair.add}: {len(bufs)} bindings")
    cost = linear_cost(pair.m, pair.n, pair.k, 2, 1, 2 + (bias_buf is not None),
                       4 * pair.m * pair.n * len(pair.epilogue_inputs))
    if pair.m > SKINNY_ROWS:
        t = tiling(pair.m, pair.k // 4, gemm_variant(L.features))
        tile_m, tile_n = t["ty"] * t["rm"], t["tx"] * t["rn"]
        groups = (-(-pair.n // tile_n), -(-pair.m // tile_m), 1)
        if max(groups) > 65535:
            raise PlanError(f"dual linear at node {pair.add}: {groups} workgroups")
        kern = L.kernel("fused/linear_q8_dual_tiled", m=pair.m, n=pair.n, k=pair.k,
                        kw=pair.k // 4, dot4=DOT4_FEATURE in L.features,
                        has_bias=bias_buf is not None, bias_a=has_bias[0], bias_b=has_bias[1],
                        add=pair.add_element, epilogue=epilogue, tile_m=tile_m, tile_n=tile_n,
                        zero_word=epilogue["zero_word"] if epilogue else len(params) - 1, **t)
        L.dispatch(kern, bufs, groups, label=label, cost=cost)
        return
    variant = decode_variant(L.features)
    if variant.startswith("splitk"):
        kern, groups = splitk_kernel(L, variant, pair.m, pair.n, pair.k, 2, x_float=False,
                                     has_bias=bias_buf is not None, biases=has_bias,
                                     add=pair.add_element, epilogue=epilogue)
        L.dispatch(kern, bufs, groups, label=label, cost=cost)
        return
    v = DECODE_VARIANTS[variant]
    groups, row = L.grid(-(-pair.n // v["cols"]), v["workgroup"])
    kern = L.kernel("fused/linear_q8_dual", m=pair.m, n=pair.n, k=pair.k, kw=pair.k // 4,
                    dot4=DOT4_FEATURE in L.features, vec4=pair.k % 16 == 0,
                    has_bias=bias_buf is not None, bias_a=has_bias[0], bias_b=has_bias[1],
                    add=pair.add_element, epilogue=epilogue, row=row, **v)
    L.dispatch(kern, bufs, groups, label=label, cost=cost)
