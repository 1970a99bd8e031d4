"""Planner hints per adapter type (planner/hints.py): the page says `adapter_type:CPU|GPU`, natively
wgpu's adapter type is used; both map to the same kernel variants."""

from __future__ import annotations

import numpy as np

from conftest import FIXTURES
from harness import assert_close
from webpte.native import Executor
from webpte.planner.hints import adapter_hints, resolve_hints, variant_features
from webpte.program import plan_method
from webpte.pte import read_program


def test_cpu_adapters_keep_the_plain_kernels_and_gpus_get_the_split_ones():
    assert adapter_hints("CPU") == {"q8_decode:skinny", "q8_gemm:d8x16", "f32_gemm:direct",
                                    "attention:serial", "norm:redundant"}
    assert adapter_hints("DiscreteGPU") == {"q8_decode:splitk", "attn_kv_chunk:256",
                                            "topk:bitonic"}
    assert resolve_hints(["dot4", "adapter_type:CPU"]) == {
        "dot4", "q8_decode:skinny", "q8_gemm:d8x16", "f32_gemm:direct", "attention:serial",
        "norm:redundant"}
    assert resolve_hints(["adapter_type:GPU", "q8_decode:skinny"]) == {
        "q8_decode:skinny", "attn_kv_chunk:256", "topk:bitonic"}   # an explicit hint wins
    assert resolve_hints(["q8_decode:splitk"]) == {"q8_decode:splitk"}


def test_a_driver_refines_a_cpu_adapters_hints():
    """lavapipe's device name gives its many-row tile and regrouped W, SwiftShader's its
    int8 dot and the dual kernel's f32 products (natively from wgpu's device name, in the
    page from adapter_device: its vendor, architecture and description); GPUs keep theirs."""
    cpu = adapter_hints("CPU")
    assert adapter_hints("CPU", "llvmpipe (LLVM 15.0.6, 256 bits)") == (
        cpu - {"q8_gemm:d8x16"} | {"q8_gemm:d16x16", "q8_w:interleaved"})
    swiftshader = cpu | {"q8_dot:unpacked", "q8_f32:on"}
    assert adapter_hints("CPU", "SwiftShader Device (Subzero)") == swiftshader
    assert adapter_hints("DiscreteGPU", "llvmpipe") == adapter_hints("DiscreteGPU")
    assert resolve_hints(["adapter_type:CPU", "adapter_device:google swiftshader"]) == swiftshader
    assert resolve_hints(["adapter_type:CPU", "adapter_device:x", "q8_dot:dot4"]) == (
        cpu | {"q8_dot:dot4"})
    assert resolve_hints(["adapter_device:google swiftshader"]) == set()   # no type: no hints


def test_the_gpu_plan_of_a_decoder_gives_the_cpu_plans_outputs(gpu):
    data = (FIXTURES / "decoder_q8_tiny.pte").read_bytes()
    prog = read_program(data)
    plans = {t: plan_method(prog, "forward", [f"adapter_type:{t}"]) for t in ("CPU", "GPU")}
    names = {t: {k.name.rsplit("_", 1)[0] for k in p.kernels} for t, p in plans.items()}
    assert "linear_q8_splitk" in names["GPU"] and "linear_q8_splitk" not in names["CPU"]
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s.shape).astype(s.dtype) if s.dtype == "float32"
              else np.zeros(s.shape, s.dtype) for s in plans["CPU"].inputs]
    assert "sdpa_serial" in names["CPU"] and "sdpa_attention" in names["GPU"]
    outs = {t: Executor(p, data).run(inputs) for t, p in plans.items()}
    for a, b in zip(outs["CPU"], outs["GPU"], strict=True):
        # int32 accumulators and the same epilogues; only attention's per-tile sum of exp is
        # added in another order (serial vs tree), which moves the logits by float rounding.
        assert_close(a, b, rel=1e-5, what="CPU plan vs GPU plan")


def test_a_bench_variant_replaces_the_hints_of_its_kinds():
    cpu = adapter_hints("CPU") | {"packed_4x8_integer_dot_product"}
    assert variant_features(cpu, "splitk") == cpu - {"q8_decode:skinny"} | {"q8_decode:splitk"}
    assert variant_features(cpu, "attention:tiled+q8_decode:splitk16") == (
        cpu - {"q8_decode:skinny", "attention:serial"}
        | {"attention:tiled", "q8_decode:splitk16"})
    # In the page the adapter's hints come later, from adapter_type: the variant's still win.
    page = variant_features({"adapter_type:CPU"}, "attention:tiled")
    assert resolve_hints(page) == adapter_hints("CPU") - {"attention:serial"} | {
        "attention:tiled"}
