"""Goldens for the browser suite, written by the native (numpy) side.

For every `tests/fixtures/*.pte`, `tests/fixtures/gemma4/*.pte` and
`tests/fixtures/gemma4_vision/*.pte` with its `.npz`: the calls
(inputs and eager reference outputs) as raw little-endian tensors, and whether the program
plans natively (and if not, which ops are missing). For a few synthetic graphs
(GraphBuilder; SYNTHETIC here and the GOLDENS of tests/browser/goldens_*.py) that plan with the
kernels that exist today: the Plan JSON, the constant blob, seeded inputs and the numpy
reference outputs; the page loads those through `loadProgram(blob, {plan})`.

Usage: python tests/browser/make_goldens.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from webpte.cli import _calls_from_npz
from webpte.errors import UnsupportedOpError, WebpteError
from webpte.kernels.reference import run_reference
from webpte.planner import lower
from webpte.program import plan_method
from webpte.pte import read_program
from webpte.pte.builder import GraphBuilder

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def tolerance(name: str) -> float:
    """Program tolerance (tests/test_programs.py): rel-L2 2e-3 for q8 programs, else 1e-4."""
    return 2e-3 if "q8" in name else 1e-4


def write_tensor(out: Path, rel: str, arr: np.ndarray) -> dict:
    arr = np.asarray(arr)  # not ascontiguousarray: it turns 0-d arrays into shape (1,)
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_bytes(arr.astype(arr.dtype.newbyteorder("<")).tobytes(order="C"))
    return {"file": rel, "dtype": str(arr.dtype), "shape": list(arr.shape)}


def write_calls(out: Path, name: str, calls) -> list[dict]:
    return [{"inputs": [write_tensor(out, f"{name}/call{i}_input_{j}.bin", a)
                        for j, a in enumerate(ins)],
             "outputs": [write_tensor(out, f"{name}/call{i}_output_{j}.bin", a)
                         for j, a in enumerate(outs)]}
            for i, (ins, outs) in enumerate(calls)]


def fixture_entry(out: Path, pte: Path) -> dict:
    entry = {"name": pte.stem, "pte": f"fixtures/{pte.relative_to(FIXTURES).as_posix()}",
             "tolerance": tolerance(pte.stem),
             "calls": write_calls(out, pte.stem, _calls_from_npz(str(pte.with_suffix(".npz"))))}
    try:
        plan = plan_method(read_program(pte.read_bytes()), "forward")
        entry["native"] = {"status": "ok", "dispatches": len(plan.dispatches)}
    except UnsupportedOpError as e:
        entry["native"] = {"status": "unsupported", "ops": e.ops, "message": str(e)}
    except WebpteError as e:
        entry["native"] = {"status": "error", "name": type(e).__name__, "message": str(e)}
    return entry


def _add_with_constant(rng):
    b = GraphBuilder()
    x = b.tensor(np.float32, (3, 37))
    w = b.constant(rng.standard_normal((37,)).astype(np.float32))
    o = b.tensor(np.float32, (3, 37))
    b.op("aten.add.Tensor", x, w, b.scalar(1), o)
    return b.build([x], [o]), [rng.standard_normal((3, 37)).astype(np.float32)]


def _linear(rng):
    b = GraphBuilder()
    x = b.tensor(np.float32, (1, 5, 67))
    w = b.constant(rng.standard_normal((19, 67)).astype(np.float32))
    bias = b.constant(rng.standard_normal((19,)).astype(np.float32))
    o = b.tensor(np.float32, (1, 5, 19))
    b.op("aten.linear.default", x, w, bias, o)
    return b.build([x], [o]), [rng.standard_normal((1, 5, 67)).astype(np.float32)]


def _bmm_two_inputs(rng):
    b = GraphBuilder()
    x, y = b.tensor(np.float32, (2, 9, 33)), b.tensor(np.float32, (2, 33, 13))
    o = b.tensor(np.float32, (2, 9, 13))
    b.op("aten.bmm.default", x, y, o)
    return b.build([x, y], [o]), [rng.standard_normal((2, 9, 33)).astype(np.float32),
                                  rng.standard_normal((2, 33, 13)).astype(np.float32)]


def _int32_mul(rng):
    b = GraphBuilder()
    x, y = b.tensor(np.int32, (5, 3)), b.tensor(np.int32, (3,))
    o = b.tensor(np.int32, (5, 3))
    b.op("aten.mul.Tensor", x, y, o)
    return b.build([x, y], [o]), [rng.integers(-1000, 1000, (5, 3)).astype(np.int32),
                                  rng.integers(-1000, 1000, (3,)).astype(np.int32)]


def _dual_linear_q8(rng):
    """Two int8 linears on one W, summed (the decoders' two-pass linear), 4 rows; unit scales
    and zero points make every output an exact integer."""
    m, k, n = 4, 576, 37
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    sums = np.zeros(40, np.int32)
    sums[:n] = w.astype(np.int64).sum(1)
    b = GraphBuilder()
    xa, xb = b.tensor(np.int8, (1, m, k)), b.tensor(np.int8, (1, m, k))
    ya, yb, y = (b.tensor(np.float32, (1, m, n)) for _ in range(3))
    wc, sc, scc = b.constant(w), b.constant(sums), b.constant(np.ones(40, np.float32))
    for x, o in ((xa, ya), (xb, yb)):
        b.op("et_vk.linear_q8ta_q8csw.default", x, b.scalar(1.0), b.scalar(0), wc, sc, scc,
             b.scalar(None), o)
    b.op("aten.add.Tensor", ya, yb, b.scalar(1), y)
    return b.build([xa, xb], [y]), [rng.integers(-128, 128, (1, m, k)).astype(np.int8)
                                    for _ in range(2)]


SYNTHETIC = {"add_constant_f32": _add_with_constant, "linear_bias_f32": _linear,
             "bmm_f32": _bmm_two_inputs, "mul_int32": _int32_mul}
# Planned with kernel variants the page's own plans of these graphs would not pick (a
# software adapter plans for CPUs): the split-K decode linear, its partial sums added with
# subgroupAdd (WGSL `enable subgroups;`), exact integers compared exactly; the per-column
# kernel reading W regrouped at load (lavapipe's `q8_w:interleaved`: the page's own
# regrouping of the file bytes, web/plan.js interleaveRows, 37 rows in groups of 8).
SYNTHETIC_VARIANTS = {
    "dual_linear_q8_splitk_subgroups": (
        _dual_linear_q8, ["q8_decode:splitk", "subgroups", "packed_4x8_integer_dot_product"]),
    "dual_linear_q8_interleaved": (_dual_linear_q8, ["q8_decode:skinny", "q8_w:interleaved"]),
}


def more_synthetic() -> dict:
    """The `GOLDENS` of every tests/browser/goldens_*.py: more graphs like SYNTHETIC's
    (name -> make(rng) -> ((graph, blob), inputs)), one module per op family."""
    import importlib.util

    found: dict = {}
    for path in sorted(Path(__file__).parent.glob("goldens_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        clash = set(found) & set(module.GOLDENS) | set(SYNTHETIC) & set(module.GOLDENS)
        if clash:
            raise ValueError(f"{path.name} names goldens that exist already: {sorted(clash)}")
        found.update(module.GOLDENS)
    return found


def synthetic_entry(out: Path, name: str, make, features=(), exact: bool = False) -> dict:
    rng = np.random.default_rng(20260)
    (graph, blob), inputs = make(rng)
    plan = lower(graph, features=features)
    env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob)
    outputs = [np.asarray(env.get(v)) for v in graph.output_ids]
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "plan.json").write_text(plan.to_json())
    (out / name / "blob.bin").write_bytes(blob or b"\0\0\0\0")
    exact = exact or all(o.dtype.kind in "iub" for o in outputs)
    return {"name": name, "plan": f"golden/{name}/plan.json", "blob": f"golden/{name}/blob.bin",
            "tolerance": 0.0 if exact else 1e-5,
            "calls": write_calls(out, name, [(inputs, outputs)])}


# Hand-written plans for what no lowered graph exercises yet: bool constants (u8_to_u32) at an
# unaligned file offset, scalar words, int8 packed inputs, int64 inputs/outputs, state across
# calls and reset.
_COPY_WGSL = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<i32>;
@group(0) @binding(2) var<storage, read> n: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < n[0]) { o[g.x] = i32(a[g.x]) + i32(n[1]); }
}"""

_ACCUMULATE_WGSL = """@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> k: array<i32>;
@group(0) @binding(2) var<storage, read_write> acc: array<i32>;
@group(0) @binding(3) var<storage, read_write> o: array<i32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x;
  if (i >= 5u) { return; }
  let b = (x[i / 4u] >> ((i % 4u) * 8u)) & 0xffu;
  let v = select(i32(b), i32(b) - 256, b >= 128u);
  acc[i] = acc[i] + v * k[0];
  o[i] = acc[i];
}"""


def _buffer(i, size, role, init=None):
    return {"id": i, "size": size, "role": role, "label": f"{role}{i}", "init": init, "values": []}


def _plan(buffers, wgsl, bindings, inputs, outputs, state=()):
    return {"method": "forward", "version": 1, "max_context": None, "buffers": buffers,
            "kernels": [{"id": 0, "name": "handmade", "wgsl": wgsl, "entry": "main"}],
            "dispatches": [{"kernel": 0, "bindings": bindings, "workgroups": [1, 1, 1],
                            "op": "handmade", "node": 0}],
            "inputs": inputs, "outputs": outputs, "state": list(state),
            "limits": {"max_buffer_size": max(b["size"] for b in buffers),
                       "max_storage_buffer_binding_size": max(b["size"] for b in buffers),
                       "max_storage_buffers_per_shader_stage": len(bindings)}}


def _io(buffer, dtype, shape, storage):
    return {"buffer": buffer, "dtype": dtype, "shape": list(shape), "storage": storage,
            "name": None}


def handmade_entries(out: Path) -> list[dict]:
    rng = np.random.default_rng(7)
    flags = (rng.random(7) > 0.5).astype(np.uint8)
    blob = bytes([0xAA, 0xBB, 0xCC]) + flags.tobytes() + bytes([0xDD] * 6)  # flags at offset 3
    copy = _plan([_buffer(0, 28, "constant", {"kind": "file", "offset": 3, "nbytes": 7,
                                              "convert": "u8_to_u32"}),
                  _buffer(1, 28, "output"),
                  _buffer(2, 8, "scalar", {"kind": "words", "words": [7, 1000]})],
                 _COPY_WGSL, [0, 1, 2], [], [_io(1, "int32", (7,), "i32")])
    x = rng.integers(-128, 128, 5).astype(np.int8)
    ks = [np.array([k], np.int64) for k in (3, -7, 5)]
    acc = _plan([_buffer(0, 8, "input"), _buffer(1, 4, "input"),
                 _buffer(2, 20, "state", {"kind": "zeros"}), _buffer(3, 20, "output")],
                _ACCUMULATE_WGSL, [0, 1, 2, 3],
                [_io(0, "int8", (5,), "i8"), _io(1, "int64", (1,), "i32")],
                [_io(3, "int64", (5,), "i32")], state=[2])
    x64 = x.astype(np.int64)
    acc_calls = [([x, ks[0]], [x64 * 3]), ([x, ks[1]], [x64 * 3 - x64 * 7]),
                 ([x, ks[2]], [x64 * 5])]
    entries = []
    for name, plan, data, calls in (("handmade_bool_constant", copy, blob,
                                     [([], [flags.astype(np.int32) + 1000])]),
                                    ("handmade_state_int8_int64", acc, b"\0\0\0\0", acc_calls)):
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "plan.json").write_text(json.dumps(plan))
        (out / name / "blob.bin").write_bytes(data)
        entry = {"name": name, "plan": f"golden/{name}/plan.json",
                 "blob": f"golden/{name}/blob.bin", "tolerance": 0.0,
                 "calls": write_calls(out, name, calls)}
        if name == "handmade_state_int8_int64":
            entry["calls"][2]["reset"] = True  # a reset before call 2 restarts the sum
        entries.append(entry)
    return entries


def readout_entries(out: Path) -> list[dict]:
    """The device readout (kernels/sampling/topk.py) of 64 candidates in each variant, run
    as a plan of its own whose output is the readout's words (ids, then logits' bits) over
    logits with many ties, signed zeros, infinities and NaN; the page on SwiftShader plans
    the lane variant itself, GPUs the bitonic one."""
    from webpte.kernels.sampling.topk import (
        CANDIDATES,
        TOPK_HINT,
        TOPK_VARIANTS,
        add_readouts,
        readout_words,
    )
    from webpte.plan.model import BufferSpec, IOSpec, Plan

    rng = np.random.default_rng(20261)
    vocab = 5003
    x = (rng.integers(-40, 8, (1, 1, vocab)) * 0.25).astype(np.float32)
    x[0, 0, rng.integers(0, vocab, 5)] = 2.0
    x[0, 0, rng.integers(0, vocab, 9)] = -0.0
    x[0, 0, rng.integers(0, vocab, 7)] = np.nan
    x[0, 0, [3, 4001]] = [np.inf, -np.inf]
    words = readout_words(x, CANDIDATES).view(np.int32)
    entries = []
    for variant in TOPK_VARIANTS:
        io = IOSpec(0, "float32", x.shape, "f32")
        plan = add_readouts(Plan("forward", [BufferSpec(0, 4 * vocab, "input", "logits")],
                                 [], [], [io], [io]), (CANDIDATES,), [TOPK_HINT + variant])
        r = plan.readouts.pop()
        plan.dispatches = r.dispatches
        plan.buffers[r.buffer].role = "output"
        plan.outputs = [IOSpec(r.buffer, "int32", (2 * CANDIDATES,), "i32")]
        name = f"readout_top{CANDIDATES}_{variant}"
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "plan.json").write_text(plan.to_json())
        (out / name / "blob.bin").write_bytes(b"\0\0\0\0")
        entries.append({"name": name, "plan": f"golden/{name}/plan.json",
                        "blob": f"golden/{name}/blob.bin", "tolerance": 0.0,
                        "calls": write_calls(out, name, [([x], [words])])})
    return entries


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    programs = sorted(FIXTURES.glob("*.pte")) + sorted(FIXTURES.glob("gemma4/*.pte"))
    programs += sorted(FIXTURES.glob("gemma4_vision/*.pte"))
    programs += sorted(FIXTURES.glob("semantics/*.pte"))   # ExecuTorch's memory model
    fixtures = [fixture_entry(out, p) for p in programs if p.with_suffix(".npz").exists()]
    synthetic = [synthetic_entry(out, n, m) for n, m in {**SYNTHETIC, **more_synthetic()}.items()]
    synthetic += [synthetic_entry(out, n, m, f, exact=True)
                  for n, (m, f) in SYNTHETIC_VARIANTS.items()]
    synthetic += handmade_entries(out) + readout_entries(out)
    (out / "manifest.json").write_text(json.dumps({"fixtures": fixtures, "synthetic": synthetic},
                                                  indent=1))
    for f in fixtures:
        print(f"golden {f['name']}: {len(f['calls'])} calls, natively {f['native']['status']}")
    print(f"golden synthetic: {', '.join(s['name'] for s in synthetic)}")


if __name__ == "__main__":
    main(sys.argv[1])
