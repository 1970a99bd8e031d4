"""Tier 0: the exported fixtures exercise the op sets of the published SmolVLM programs
(shared/docs/smolvlm-files.md), fully delegated, with a kernel for every op."""

from __future__ import annotations

from pathlib import Path

import pytest

from webpte.kernels.registry import registry
from webpte.program import inspect

FIXTURES = Path(__file__).parent / "fixtures"

# Delegate op names of the published programs (without overload suffixes).
VISION_OPS = {
    "aten._softmax", "aten.add.Tensor", "aten.bmm", "aten.clamp", "aten.clone",
    "aten.convolution", "aten.gelu", "aten.mul.Tensor", "aten.native_layer_norm",
    "aten.permute_copy", "aten.round", "aten.squeeze_copy.dims", "aten.sub.Tensor",
    "aten.view_copy", "dim_order_ops._to_dim_order_copy", "et_vk.linear_q8ta_q8csw",
    "et_vk.prepack", "quantized_decomposed.quantize_per_tensor",
}
DECODER_OPS = {
    "aten._to_copy", "aten.add.Tensor", "aten.clamp", "aten.clone", "aten.mul.Tensor",
    "aten.relu", "aten.round", "aten.select_copy.int", "aten.sigmoid", "aten.sub.Tensor",
    "aten.view_copy", "et_vk.apply_rotary_emb_hf", "et_vk.linear_q8ta_q8csw", "et_vk.prepack",
    "et_vk.rms_norm", "et_vk.select_as_symint", "quantized_decomposed.quantize_per_tensor",
    "sdpa_with_kv_cache",
}


def _short(name: str) -> str:
    # Serialized names carry an overload (".default"); the published lists mostly do not.
    return name[: -len(".default")] if name.endswith(".default") else name


@pytest.mark.parametrize("fixture,published", [("vision_q8_tiny", VISION_OPS),
                                               ("decoder_q8_tiny", DECODER_OPS)])
def test_fixture_covers_published_op_set(fixture, published):
    info = inspect(FIXTURES / f"{fixture}.pte")
    fwd = info["methods"]["forward"]
    have = {_short(n) for n in fwd["op_histogram"]}
    assert published <= have, f"missing published ops: {sorted(published - have)}"
    assert fwd["host_graph_breaks"] == [] and fwd["unsupported_ops"] == []
    assert info["policy"]["ok"]


def test_registry_covers_both_published_programs():
    names = {_short(n) for n in registry()}
    assert VISION_OPS | DECODER_OPS <= names, sorted((VISION_OPS | DECODER_OPS) - names)
