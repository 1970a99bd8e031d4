"""Tier 0: how the committed op catalog subset is chosen (tools/catalog_variants.py): a case's
kernel variants are its kernels' WGSL with the numbers taken out, and per op the smallest case,
the largest that fits and each case that plans a new variant are kept."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from test_op_attention import _sdpa_graph
from webpte.planner import lower
from webpte.planner.hints import adapter_hints

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
from catalog_variants import (  # noqa: E402
    VARIANT_TARGETS,
    CatalogCase,
    choose,
    read_cases,
    wgsl_shape,
)

CATALOG = Path(__file__).parent / "fixtures" / "op_catalog"


def _sdpa_variants(qs, ks, mask=None, kind=("CPU", "llvmpipe")):
    g, _ = _sdpa_graph(qs, ks, mask)
    plan = lower(g, features=adapter_hints(*kind))
    return {(k.name.rsplit("_", 1)[0], wgsl_shape(k.wgsl)) for k in plan.kernels}


def test_sizes_are_one_variant_and_template_branches_another():
    small = _sdpa_variants((1, 4, 8, 16), (1, 4, 8, 16))
    assert small == _sdpa_variants((1, 4, 6, 128), (1, 4, 6, 128))     # other sizes
    assert small == _sdpa_variants((1, 8, 4, 16), (1, 2, 16, 16))      # GQA: a divisor
    masked = _sdpa_variants((1, 4, 8, 16), (1, 4, 8, 16), np.zeros((8, 8), np.float32))
    long = _sdpa_variants((1, 2, 16, 64), (1, 2, 576, 64))             # keys split
    assert len({frozenset(v) for v in (small, masked, long)}) == 3
    assert {name for name, _ in long} == {"sdpa_serial", "sdpa_combine"}
    gpu = _sdpa_variants((1, 2, 16, 64), (1, 2, 576, 64), kind=("DiscreteGPU",))
    assert {name for name, _ in gpu} == {"sdpa_attention", "sdpa_combine"}


def test_the_workgroup_size_is_part_of_the_variant():
    body = "@compute @workgroup_size({}) fn main() {{ let x = {}u; }}"
    assert wgsl_shape(body.format(64, 3)) == wgsl_shape(body.format(64, 1000))
    assert wgsl_shape(body.format(64, 3)) != wgsl_shape(body.format(8, 3))
    assert wgsl_shape("var a: vec4<f32>;") != wgsl_shape("var a: vec2<f32>;")


def _case(name, numel, nbytes, *variants):
    return CatalogCase("op", name, f"op__{name}.pte", [], numel, nbytes, frozenset(variants))


def test_smallest_largest_that_fits_and_each_new_variant():
    cases = [_case("small", 10, 100, "a"), _case("same", 20, 200, "a"),
             _case("masked", 30, 300, "a", "m"), _case("bulky", 60, 9500, "a", "m2"),
             _case("huge", 90, 9000, "a", "split"), _case("big", 80, 800, "a", "wide"),
             _case("m2", 70, 700, "m2")]   # bulky's variant: planned by a case that fits
    choice = choose(cases, max_bytes=1000)
    assert [(c.name, why) for c, why in choice.chosen] == [
        ("small", "smallest"), ("big", "largest"), ("masked", "variant"), ("m2", "variant")]
    assert [(c.name, set(new)) for c, new in choice.too_large] == [("huge", {"split"})]


def test_the_committed_subset_keeps_every_op_and_fits():
    cases = read_cases(CATALOG)
    assert len({c.op for c in cases}) == 87
    assert all(c.nbytes <= 1 << 20 for c in cases), [c.pte for c in cases if c.nbytes > 1 << 20]
    assert set(VARIANT_TARGETS) == {"lavapipe", "swiftshader", "gpu"}
    assert "et_vk_sdpa__selfattn_siglip_keys.pte" in {c.pte for c in cases}
