"""The kernels of the int8 linear fusions (planner/fusion_q8.py finds them): one dispatch per
DualLinear, PairedLinears (with its Tail) and JoinedLinears, each bit-identical to the
dispatches of the nodes it replaces."""

from __future__ import annotations

import math

from ..errors import PlanError
from ..kernels.element import Element
from ..kernels.quantized.linear_q8 import (
    DECODE_VARIANTS,
    SKINNY_ROWS,
    decode_variant,
    gemm_variant,
    linear_cost,
    splitk_kernel,
    tiling,
    use_dot4,
    use_f32_dot,
    use_interleaved_w,
)
from ..kernels.quantized.quantize import f32
from ..kernels.storage import WGSL_TYPE
from .fusion import MAX_BINDINGS, _element, chain_code
from .fusion_q8 import DualLinear, JoinedLinears, PairedLinears, Tail, _buffer_key
from .share import prepacked


def _interleave(L, n: int, k: int, segments: int, paired: bool) -> dict | None:
    """The W regrouping (plan/interleave.py) of the skinny dual kernel for these features
    (`q8_w:interleaved`, vec4 rows), or None: row-major W."""
    variant = decode_variant(L.features)
    if variant.startswith("splitk") or k % 16 or not use_interleaved_w(L.features):
        return None
    group = DECODE_VARIANTS[variant]["cols"] // (2 if paired else 1)
    if n < group:   # one invocation's rows: nothing to regroup
        return None
    return {"row_bytes": k, "rows": n, "segments": segments, "group": group}


def _shared_operands(L, pairs, label: str, paired: bool) -> tuple[list[int], list, bool]:
    """The bindings every shared dispatch starts with (x of each pass, the pairs' W rows
    back to back, their sums then their scales), its params' pass words (input scale and
    zero point of each pass of each pair) and whether W is regrouped (_interleave)."""
    calls = [[L.graph.node(n) for n in p.linears] for p in pairs]
    first = pairs[0]
    ilv = (_interleave(L, first.n, first.k, 2, True) if paired else
           _interleave(L, sum(p.n for p in pairs), first.k, 1, False))
    w = L.joined_constant([(c[0].args[3], p.n * p.k) for c, p in zip(calls, pairs)],
                          f"{label}_w", ilv)
    percol = L.joined_constant([(c[0].args[i], 4 * p.n) for i in (4, 5)
                                for c, p in zip(calls, pairs)], f"{label}_percol")
    params = [word for cs in calls for c in cs
              for word in (f32(L.args.float(c.args[1])), L.args.int(c.args[2]))]
    return ([L.buf(calls[0][0].args[0]), L.buf(calls[0][1].args[0]), w, percol], params,
            ilv is not None)


def _shared_dispatch(L, pairs, bufs: list[int], label: str, ilv: bool, *, epilogue=None,
                     segments=None, tail=None) -> None:
    """The shared dispatch of `pairs`: joined (`segments`: their columns one after another)
    or paired (no segments: the same columns of both), in the decode kernel the features
    ask for; `ilv`: W regrouped (_shared_operands)."""
    first, paired = pairs[0], segments is None
    n = first.n if paired else sum(p.n for p in pairs)
    variant = decode_variant(L.features)
    if variant.startswith("splitk"):
        kern, groups = splitk_kernel(L, variant, first.m, n, first.k, 2, paired=paired,
                                     x_float=False, has_bias=False, biases=[False, False],
                                     add=first.add_element, epilogue=epilogue,
                                     segments=segments)
        x_loads = math.prod(groups)
    else:
        v = DECODE_VARIANTS[variant]
        fdot = first.k % 16 == 0 and use_f32_dot(L.features)
        x_loads = -(-n // (v["cols"] // 2 if paired else v["cols"]))  # invocations
        groups, row = L.grid(x_loads, v["workgroup"])
        kern = L.kernel("fused/linear_q8_dual", m=first.m, n=n, k=first.k, kw=first.k // 4,
                        dot4=use_dot4(L.features) and not fdot, vec4=first.k % 16 == 0,
                        fdot=fdot,
                        has_bias=False, bias_a=False, bias_b=False, add=first.add_element,
                        epilogue=epilogue, row=row, segments=segments, paired=paired,
                        tail=tail, ilv=ilv, **v)
    # Every invocation (or split-K workgroup) loads x once for all the pairs' columns it has.
    cost = {"bytes_read": 0, "macs": 0, "bytes_loaded": 0}
    for i, pair in enumerate(pairs):
        for key, value in linear_cost(pair.m, pair.n, pair.k, 2, 1, 2,
                                      x_loads=0 if i else x_loads).items():
            cost[key] += value
    L.dispatch(kern, bufs, groups, cost=cost, label=label)


def lower_paired_linears(L, pp: PairedLinears) -> None:
    """One dispatch: the skinny dual kernel with half its columns an invocation, of both
    linears, or the split-K kernel with both linears' columns a workgroup; each accumulator,
    its dequantization and the chains exactly as the two pairs' own dispatches have them
    (bit-identical)."""
    pairs = (pp.first, pp.second)
    bufs, params, ilv = _shared_operands(L, pairs, f"paired{pp.second.add}", True)
    chain = {**pp.first.epilogue, **pp.second.epilogue}
    sums = {L.graph.node(p.add).args[3]: name for p, name in zip(pairs, ("y", "y2"))}
    numel = pp.second.m * pp.second.n
    epilogue, code = _epilogue_spec(L, chain, [], sums, numel, len(params))
    label = f"fused:linear_q8+linear_q8+add:paired+{epilogue['ops']}"
    words = [*params, *code["words"]]
    if pp.tail is None:
        bufs += [L.params(*words), L.buf(chain[pp.root].out)]
        _shared_dispatch(L, pairs, bufs, label, ilv, epilogue=epilogue)
        return
    tail, consts, twords = _tail_spec(L, pp.tail, chain[pp.root].out, numel, len(words))
    bufs.append(L.params(*words, *twords))
    if consts is not None:
        bufs.append(consts)
    bufs += [L.buf(_element(L.graph, node).out) for node in pp.tail.group.outputs]
    _shared_dispatch(L, pairs, bufs, f"{label}+{tail['ops']}", ilv, epilogue=epilogue,
                     tail=tail)


def _tail_spec(L, tail: Tail, held: int, numel: int, at: int) -> tuple[dict, int | None, list]:
    """The dual kernel's `tail` parameter for `tail` on the held value `held` (register hv),
    its runtime words from params word `at`; the buffer of its scalar constants (a word
    each, equal constants once; None: it reads none) and those words."""
    g, source = tail.group, prepacked(L.graph)
    register = {held: "hv"}
    words_of: dict = {}   # buffer key -> (word, the constant)
    for v in tail.consts:
        c = source.get(v, v)
        word, _ = words_of.setdefault(_buffer_key(L.graph, c), (len(words_of), c))
        register[v] = f"kc{word}"
    elements = {node: _element(L.graph, node) for node in g.chain}
    code = chain_code(L, g.chain, elements, [], register, numel, at=at)
    step = {node: k for k, node in enumerate(g.chain)}
    spec = {"steps": code["steps"], "zero": code["zero"],
            "consts": [{"name": f"kc{j}", "ty": WGSL_TYPE[L.storage(c)], "word": j}
                       for j, c in words_of.values()],
            "outputs": [step[node] for node in g.outputs],
            "ops": "+".join(elements[node].op for node in g.chain)}
    consts = (L.joined_constant([(c, 4) for _, c in words_of.values()], f"tail{g.at}_consts")
              if words_of else None)
    return spec, consts, code["words"]


def lower_joined_linears(L, group: JoinedLinears) -> None:
    """One decode dispatch for the group: each column's accumulators and dequantization
    exactly as its own pair's dual kernel has them (bit-identical outputs)."""
    bufs, params, ilv = _shared_operands(L, group.pairs, f"joined{group.pairs[0].add}",
                                         False)
    segments, start = [], 0
    for pair in group.pairs:
        segments.append({"start": start, "n": pair.n})
        start += pair.n
    bufs += [L.params(*params), *(L.buf(L.graph.node(p.add).args[3]) for p in group.pairs)]
    _shared_dispatch(L, group.pairs, bufs,
                     f"fused:linear_q8+linear_q8+add:joined{len(group.pairs)}", ilv,
                     segments=segments)


def _epilogue_spec(L, chain: dict[int, Element], external: list[int], register: dict[int, str],
                   numel: int, at: int) -> tuple[dict, dict]:
    """The dual kernels' `epilogue` parameter for the elementwise `chain` (node -> element,
    in order) on the held values `register`, its runtime words from params word `at`; and
    chain_code's result (the external inputs' buffers, the words)."""
    code = chain_code(L, list(chain), chain, external, register, numel, at=at)
    root = chain[max(chain)]
    epilogue = {"inputs": [(f"a{j}", ty, "read") for j, ty in enumerate(code["wgsl"])],
                "externals": code["externals"], "steps": code["steps"], "ty": root.ty,
                "out_kind": L.storage(root.out), "out_wgsl": WGSL_TYPE[L.storage(root.out)],
                "ops": "+".join(e.op for e in chain.values()),
                "zero_word": code["zero"]}   # the opaque zero of `stored` and the chain
    return epilogue, code


def lower_dual_linear(L, pair: DualLinear) -> None:
    """One dispatch: both passes' accumulators per output column, W read once."""
    calls = [L.graph.node(n) for n in pair.linears]
    xs, ws, sums, scales = ([c.args[i] for c in calls] for i in (0, 3, 4, 5))
    bias_ids = [c.args[6] for c in calls]
    has_bias = [L.graph.values[v] is not None for v in bias_ids]
    bias_buf = next((L.buf(v) for v, h in zip(bias_ids, has_bias) if h), None)
    ilv = None if pair.m > SKINNY_ROWS else _interleave(L, pair.n, pair.k, 1, False)
    w = (L.joined_constant([(ws[0], pair.n * pair.k)], f"dual{pair.add}_w", ilv) if ilv
         else L.buf(ws[0]))
    bufs = [L.buf(xs[0]), L.buf(xs[1]), w, L.buf(sums[0]), L.buf(scales[0])]
    if bias_buf is not None:
        bufs.append(bias_buf)
    params = []
    for c in calls:
        params += [f32(L.args.float(c.args[1])), L.args.int(c.args[2])]
    epilogue, label = None, "fused:linear_q8+linear_q8+add"
    out = L.graph.node(pair.add).args[3]
    if pair.epilogue:
        epilogue, code = _epilogue_spec(L, pair.epilogue, list(pair.epilogue_inputs),
                                        {out: "y"}, pair.m * pair.n, len(params))
        out = pair.epilogue[pair.root].out
        bufs += code["bufs"]
        params += code["words"]
        label += "+" + epilogue["ops"]
    if pair.m > SKINNY_ROWS and not pair.epilogue:
        params.append(0)   # the opaque zero of the tiled kernel's `stored`
    bufs += [L.params(*params), L.buf(out)]
    if len(bufs) > MAX_BINDINGS:
        raise PlanError(f"dual linear at node {pair.add}: {len(bufs)} bindings")
    def cost(x_loads: int, w_loads: int = 1) -> dict[str, int]:
        return linear_cost(pair.m, pair.n, pair.k, 2, 1, 2 + (bias_buf is not None),
                           4 * pair.m * pair.n * len(pair.epilogue_inputs), x_loads=x_loads,
                           w_loads=w_loads)

    if pair.m > SKINNY_ROWS:
        t = tiling(pair.m, pair.k // 4, gemm_variant(L.features))
        tile_m, tile_n = t["ty"] * t["rm"], t["tx"] * t["rn"]
        groups = (-(-pair.n // tile_n), -(-pair.m // tile_m), 1)
        if max(groups) > 65535:
            raise PlanError(f"dual linear at node {pair.add}: {groups} workgroups")
        kern = L.kernel("fused/linear_q8_dual_tiled", m=pair.m, n=pair.n, k=pair.k,
                        kw=pair.k // 4, dot4=use_dot4(L.features),
                        has_bias=bias_buf is not None, bias_a=has_bias[0], bias_b=has_bias[1],
                        add=pair.add_element, epilogue=epilogue, tile_m=tile_m, tile_n=tile_n,
                        zero_word=epilogue["zero_word"] if epilogue else len(params) - 1, **t)
        L.dispatch(kern, bufs, groups, label=label, cost=cost(groups[0], groups[1]))
        return
    variant = decode_variant(L.features)
    if variant.startswith("splitk"):
        kern, groups = splitk_kernel(L, variant, pair.m, pair.n, pair.k, 2, x_float=False,
                                     has_bias=bias_buf is not None, biases=has_bias,
                                     add=pair.add_element, epilogue=epilogue, segments=None)
        L.dispatch(kern, bufs, groups, label=label, cost=cost(math.prod(groups)))
        return
    v = DECODE_VARIANTS[variant]
    fdot = pair.k % 16 == 0 and use_f32_dot(L.features)
    groups, row = L.grid(-(-pair.n // v["cols"]), v["workgroup"])
    kern = L.kernel("fused/linear_q8_dual", m=pair.m, n=pair.n, k=pair.k, kw=pair.k // 4,
                    dot4=use_dot4(L.features) and not fdot, vec4=pair.k % 16 == 0,
                    fdot=fdot,
                    has_bias=bias_buf is not None, bias_a=has_bias[0], bias_b=has_bias[1],
                    add=pair.add_element, epilogue=epilogue, row=row, segments=None,
                    paired=False, tail=None, ilv=ilv is not None, **v)
    L.dispatch(kern, bufs, groups, label=label, cost=cost(-(-pair.n // v["cols"])))
