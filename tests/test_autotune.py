"""A measured decode variant at load (webpte/autotune.py): measured once per adapter and
program, cached, read back, and the outputs those of the untuned plan."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import FIXTURES
from webpte import autotune
from webpte.native import adapter_info
from webpte.planner.hints import variant_features
from webpte.program import load, plan_method

DECODER = FIXTURES / "decoder_q8_tiny.pte"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "autotune.json"
    monkeypatch.setenv("WEBPTE_AUTOTUNE_CACHE", str(path))
    monkeypatch.setattr(autotune, "CALLS", 1)   # one timed call a candidate and round
    return path


def _inputs(prog):
    rng = np.random.default_rng(2)
    return [rng.standard_normal(s.shape).astype(s.dtype) if s.dtype == "float32"
            else np.zeros(s.shape, s.dtype) for s in prog.plan.inputs]


def test_measured_once_then_read_from_the_cache(gpu, cache, monkeypatch):
    timed = []
    real = autotune._time

    def spy(plan, data, calls):
        timed.append(plan)
        return real(plan, data, calls)

    monkeypatch.setattr(autotune, "_time", spy)
    tuned = load(DECODER, autotune=True)
    (entry,) = json.loads(cache.read_text()).values()
    kind = "CPU" if adapter_info().get("adapter_type") == "CPU" else "GPU"
    assert entry["variant"] in autotune.CANDIDATES[kind]
    # Each distinct plan timed in both rounds; a candidate planning an earlier one's kernels
    # is not timed (on lavapipe "skinny+q8_f32:off" is "skinny": the driver's default).
    plain = load(DECODER, autotune=False)
    distinct = {}
    for v in autotune.CANDIDATES[kind]:
        plan = plan_method(plain.program, "forward", variant_features(plain.features, v))
        distinct.setdefault(tuple(k.name for k in plan.kernels), v)
    assert set(entry["times_ms"]) == set(distinct.values())
    assert len(distinct) >= 2 and len(timed) == 2 * len(distinct)
    assert variant_features((), entry["variant"]) <= tuned.features
    assert min(entry["times_ms"], key=entry["times_ms"].get) == entry["variant"]
    # A second load (asked for by the environment) reads the choice: nothing is timed.
    monkeypatch.setenv("WEBPTE_AUTOTUNE", "1")
    again = load(DECODER)
    assert len(timed) == 2 * len(distinct) and again.features == tuned.features
    monkeypatch.delenv("WEBPTE_AUTOTUNE")
    # Every variant computes the same outputs: the tuned plan's are the untuned plan's.
    plain = load(DECODER, autotune=False)
    xs = _inputs(plain)
    for a, b in zip(tuned.run(*xs), plain.run(*xs), strict=True):
        assert a.tobytes() == b.tobytes()


def test_a_damaged_cache_is_measured_again(gpu, cache):
    cache.write_text("{not json")
    load(DECODER, autotune=True)
    assert len(json.loads(cache.read_text())) == 1
    # An entry naming no candidate of this adapter type is measured again too.
    key = next(iter(json.loads(cache.read_text())))
    cache.write_text(json.dumps({key: {"variant": "nonsense"}}))
    load(DECODER, autotune=True)
    assert json.loads(cache.read_text())[key]["variant"] != "nonsense"


def test_programs_without_decode_linears_are_not_tuned(gpu, cache, monkeypatch):
    monkeypatch.setattr(autotune, "_time", lambda *a: pytest.fail("nothing to tune"))
    prog = load(FIXTURES / "siglip_block_f32.pte", autotune=True)
    assert not cache.exists() and prog.plan.dispatches
