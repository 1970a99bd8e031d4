"""What a plan needs from the device, known before weights are uploaded or downloaded
(webpte.preflight, web_glue.preflight_program): workgroup memory as WGSL lays it out, every
limit a plan reaches, a typed error naming the limit, and native loading that refuses a plan
before it makes a single GPU buffer. The page's side is tests/browser/preflight.test.mjs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webpte import preflight
from webpte.errors import AdapterError, PlanError
from webpte.preflight import AdapterLimitsError, check_fits, plan_needs, workgroup_storage_bytes
from webpte.program import plan_method
from webpte.pte import open_source, read_program
from webpte.web_glue import RangeSource, preflight_program

FIXTURES = Path(__file__).parent / "fixtures"
DECODER = FIXTURES / "decoder_q8_tiny.pte"


@pytest.mark.parametrize(("decls", "size"), [
    ("var<workgroup> a: array<f32, 7>;", 32),                 # 28 rounded up to 16
    ("var<workgroup> a: array<vec4<f32>, 3>;", 48),
    ("var<workgroup> a: array<vec3<f32>, 2>;", 32),           # vec3 strides like vec4
    ("var<workgroup> s: i32;\nvar<workgroup> v: vec4<f32>;", 32),  # v aligned to 16
    ("var<workgroup> h: array<f16, 9>;", 32),
    ("var<workgroup> c: atomic<u32>;\nvar<workgroup> t: array<array<u32, 3>, 5>;", 64),
    ("var<storage, read_write> o: array<f32>;", 0),
])
def test_workgroup_storage_as_wgsl_lays_it_out(decls, size):
    assert workgroup_storage_bytes(decls) == size


def test_a_workgroup_type_of_unknown_size_is_a_plan_error():
    with pytest.raises(PlanError, match="Tile"):
        workgroup_storage_bytes("var<workgroup> t: Tile;", "k")


def _range_source(path: Path) -> RangeSource:
    data = open_source(path)
    return RangeSource(len(data), lambda a, b: data[a:b])


@pytest.mark.parametrize("path", [DECODER, FIXTURES / "siglip_block_f32.pte",
                                  FIXTURES / "gemma4" / "gemma4_stock.pte"], ids=lambda p: p.stem)
def test_needs_come_from_the_flatbuffer_regions_and_agree_with_the_plan(path):
    source = _range_source(path)
    out = json.loads(preflight_program(source))["ok"]
    plan = plan_method(read_program(path.read_bytes()))
    assert out["needs"] == plan_needs(plan)
    needs = out["needs"]
    for name, value in plan.limits.items():   # what the executors already request
        assert needs[name] == value, name
    assert needs["device_memory"] >= plan.memory()["total"]
    assert needs["max_compute_invocations_per_workgroup"] >= 1
    assert 0 < needs["max_compute_workgroups_per_dimension"] <= 65535
    # the weights stay out: Python read the header and flatbuffers only
    consts = sum(b.size for b in plan.buffers if b.init and b.init["kind"] == "file")
    assert out["bytes_read"] <= out["file_size"] - consts // 2, (out["bytes_read"], consts)
    # the plan made from the ranges is the load's plan: the page does not plan twice
    assert out["planned"]["plan"] == plan.to_json()


def test_workgroup_needs_are_the_largest_kernel_used():
    plan = plan_method(read_program(DECODER.read_bytes()))
    used = {d.kernel for d in plan.dispatches}
    expected = max(workgroup_storage_bytes(plan.kernels[k].wgsl) for k in used)
    assert plan_needs(plan)["max_compute_workgroup_storage_size"] == expected > 0


def test_check_fits_names_the_limit_the_need_and_the_allowance():
    needs = {"max_buffer_size": 100, "max_compute_workgroup_storage_size": 20000,
             "device_memory": 10**9}
    check_fits(needs, {"max_buffer_size": 100, "max_compute_workgroup_storage_size": 32768})
    with pytest.raises(AdapterLimitsError) as e:
        check_fits(needs, {"max_buffer_size": 256, "max_compute_workgroup_storage_size": 16384})
    assert (e.value.limit, e.value.needed, e.value.allowed) == (
        "max_compute_workgroup_storage_size", 20000, 16384)
    assert isinstance(e.value, AdapterError)
    assert "20000" in str(e.value) and "16384" in str(e.value)
    with pytest.raises(AdapterLimitsError, match="device memory"):
        check_fits(needs, {"device_memory": 10**6})


def test_a_plan_errors_typed_from_preflight_program():
    data = bytearray(DECODER.read_bytes())
    data[4:8] = b"XX12"
    out = json.loads(preflight_program(bytes(data)))
    assert out["error"]["name"] == "PteFormatError"


def test_native_loading_refuses_before_any_buffer_is_made(gpu, monkeypatch):
    from webpte import Program
    from webpte.native import get_device

    real = preflight.device_limits()
    assert real["max_storage_buffer_binding_size"] > 0
    Program(DECODER)    # fits the real device
    device_type = type(get_device())
    made = []
    real_create = device_type.create_buffer

    def counting(self, *a, **k):
        made.append(k.get("size"))
        return real_create(self, *a, **k)

    monkeypatch.setattr(device_type, "create_buffer", counting)
    lowered = dict(real, max_storage_buffer_binding_size=4096)
    monkeypatch.setattr(preflight, "device_limits", lambda: lowered)
    with pytest.raises(AdapterLimitsError) as e:
        Program(DECODER)
    assert e.value.limit == "max_storage_buffer_binding_size" and e.value.allowed == 4096
    assert e.value.needed > 4096
    assert made == [], "no GPU buffer was made for a refused plan"
