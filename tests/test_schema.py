"""Tier 0: every op's arguments are checked against its schema in one place, before lowering.

Malformed calls (too few or too many arguments, a scalar where a tensor belongs, a value id
past the end of the graph) are PlanErrors naming the node, for every op of every committed
program, never a failed unpack inside a unit."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from webpte.errors import PlanError, UnsupportedOpError
from webpte.kernels.reference import run_reference
from webpte.kernels.registry import registry, schemas
from webpte.kernels.schema import check_call, parse_signature
from webpte.planner import lower
from webpte.pte import read_program
from webpte.pte.graph import DType, Graph, OpCall, TensorValue

FIXTURES = Path(__file__).parent / "fixtures"
PROGRAMS = sorted(FIXTURES.glob("*.pte")) + sorted((FIXTURES / "op_catalog").glob("*.pte"))


def _graphs():
    for path in PROGRAMS:
        m = read_program(path.read_bytes()).method("forward")
        for g in m.graphs.values():
            yield path.stem, g


def _with_call(graph, node: int, args) -> object:
    chain = list(graph.chain)
    chain[node] = OpCall(chain[node].name, tuple(args), chain[node].node_id)
    return dataclasses.replace(graph, chain=chain)


def test_every_registered_op_has_a_parsed_schema():
    assert set(schemas()) == set(registry())
    for name, unit in registry().items():
        assert parse_signature(unit.schema[name]) == schemas()[name]


def test_unknown_schema_tokens_are_refused():
    with pytest.raises(ValueError, match="unknown schema token"):
        parse_signature("T x T")


def test_add_with_one_argument_is_a_plan_error_naming_the_node():
    m = read_program((FIXTURES / "op_catalog" / "add__regular_3d.pte").read_bytes())
    g = m.method("forward").graph
    node = next(i for i, op in enumerate(g.chain) if op.name == "aten.add.Tensor")
    bad = _with_call(g, node, g.chain[node].args[:1])
    for run in (lambda: lower(bad), lambda: run_reference(bad, {}, b"")):
        with pytest.raises(PlanError, match=rf"aten.add.Tensor \(node {node}\): takes 4 arguments, "
                                            r"the graph passes 1"):
            run()


def test_wrong_kind_and_out_of_range_ids_are_plan_errors():
    m = read_program((FIXTURES / "op_catalog" / "add__regular_3d.pte").read_bytes())
    g = m.method("forward").graph
    node = next(i for i, op in enumerate(g.chain) if op.name == "aten.add.Tensor")
    a, b, alpha, out = g.chain[node].args
    with pytest.raises(PlanError, match=r"argument 1 \(value \d+\) should be a tensor, found"):
        lower(_with_call(g, node, (a, alpha, alpha, out)))
    with pytest.raises(PlanError, match=r"argument 2 is value 99999, the graph has"):
        lower(_with_call(g, node, (a, b, 99999, out)))


@pytest.mark.parametrize("seed", range(3))
def test_mutated_calls_of_every_program_give_typed_errors(seed):
    """Ops of every committed program (up to 4 per graph), their arguments dropped, duplicated
    or swapped for other values: lowering gives a plan or a typed error, never anything else."""
    rnd = random.Random(seed)
    tried = 0
    for _name, g in _graphs():
        for node in rnd.sample(range(len(g.chain)), min(4, len(g.chain))):
            args = list(g.chain[node].args)
            kind = rnd.randrange(4)
            if kind == 0 and args:
                args.pop(rnd.randrange(len(args)))
            elif kind == 1:
                args.insert(rnd.randrange(len(args) + 1), rnd.randrange(len(g.values)))
            elif kind == 2 and args:
                args[rnd.randrange(len(args))] = rnd.randrange(len(g.values))
            elif args:
                args[rnd.randrange(len(args))] = len(g.values) + rnd.randrange(5)
            bad = _with_call(g, node, args)
            try:
                lower(bad)
            except (PlanError, UnsupportedOpError):
                pass
            tried += 1
    assert tried > 150


def test_tensor_dtype_classes_are_checked():
    f32, i32 = TensorValue(DType.FLOAT32, (2,)), TensorValue(DType.INT32, (2,))
    g = Graph(values=[f32, i32, None], chain=[], input_ids=[], output_ids=[])
    sig = parse_signature("Tf Ti? Tf")
    check_call(g, 0, OpCall("x.y", (0, 2, 0)), sig)          # Null where `?` allows it
    with pytest.raises(PlanError, match=r"argument 2 \(value 1\) should be a float32 tensor, "
                                        r"found a int32 tensor"):
        check_call(g, 0, OpCall("x.y", (0, 1, 1)), sig)
    with pytest.raises(PlanError, match=r"should be a float32 tensor, found NoneType"):
        check_call(g, 0, OpCall("x.y", (2, 1, 0)), sig)


def test_scalars_shared_by_equality_fit_each_kind():
    """The Vulkan graph builder keeps one value per distinct scalar: a slice's step 2 may be
    the Double 2.0 a multiply passed (difftest program 0), a Bool the Int 1."""
    from webpte.kernels.common import Args

    x = TensorValue(DType.FLOAT32, (4,))
    g = Graph(values=[x, 2.0, True, 0, 2.5, (1.0, 0)], chain=[], input_ids=[], output_ids=[])
    check_call(g, 0, OpCall("x.y", (0, 1, 2, 3, 5, 0)), parse_signature("T i i b I T"))
    check_call(g, 0, OpCall("x.y", (0, 2, 3, 0)), parse_signature("T f f T"))
    with pytest.raises(PlanError, match=r"argument 1 \(value 4\) should be an Int, found "
                                        r"float 2.5"):
        check_call(g, 0, OpCall("x.y", (0, 4, 0)), parse_signature("T i T"))
    with pytest.raises(PlanError, match="should be a Bool"):
        check_call(g, 0, OpCall("x.y", (0, 1, 0)), parse_signature("T b T"))
    a = Args(g)
    assert (a.int(1), a.int(2), a.bool(3), a.float(2), a.ints(5)) == (2, 1, False, 1.0, (1, 0))
    assert type(a.int(1)) is int and all(type(i) is int for i in a.ints(5))
