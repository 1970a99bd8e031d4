"""Sampling on the device: the argmax / top-k readouts (kernels/sampling/topk.py) give the
host sampler's ids exactly (ties to the lowest id), natively on wgpu-py; the sampler picks
the same tokens from the candidates as from the whole row; one decode step is one submit
that creates nothing and reads back only the readout's words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from webpte.errors import InputError
from webpte.host.sampling import Candidates, Sampler, SamplingOptions
from webpte.kernels.sampling.topk import (
    CANDIDATES,
    LOOP_BUDGET,
    TOPK_HINT,
    TOPK_VARIANTS,
    add_readouts,
    lane_chunk,
    passes,
    readout_words,
)
from webpte.plan.model import BufferSpec, IOSpec, Plan

FIXTURES = Path(__file__).parent / "fixtures"


def _logits_plan(shape, features=()) -> Plan:
    """A plan that only holds logits (input = output), with the readouts appended."""
    size = 4 * int(np.prod(shape))
    plan = Plan("forward", [BufferSpec(0, size, "input", "logits")], [], [],
                [IOSpec(0, "float32", tuple(shape), "f32")],
                [IOSpec(0, "float32", tuple(shape), "f32")])
    return add_readouts(plan, features=features)


def _host_order(row: np.ndarray) -> list[int]:
    scores = list(map(float, row))
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)


def _tied_logits(rng, rows: int, vocab: int) -> np.ndarray:
    # Few distinct values: many ties, also at the top; -0 beside +0.
    x = rng.integers(-40, 8, (1, rows, vocab)).astype(np.float32) * np.float32(0.25)
    x[0, -1, rng.integers(0, vocab, 5)] = 2.0          # the maximum 5 times
    x[0, -1, rng.integers(0, vocab, 9)] = -0.0
    return x


@pytest.mark.parametrize("variant", TOPK_VARIANTS)
@pytest.mark.parametrize("rows,vocab", [(1, 49152), (4, 5003), (1, 1024), (2, 37)])
def test_readouts_match_the_host_order(gpu, rng, rows, vocab, variant):
    from webpte.native import Executor

    plan = _logits_plan((1, rows, vocab), [TOPK_HINT + variant])
    assert all(variant in plan.kernels[d.kernel].wgsl or variant == "lanes"
               for r in plan.readouts for d in r.dispatches)
    ex = Executor(Plan.from_json(plan.to_json()))
    ks = [r.k for r in plan.readouts]
    assert ks == [1, min(CANDIDATES, vocab)]
    for trial in range(2):
        x = (_tied_logits(rng, rows, vocab) if trial == 0
             else rng.standard_normal((1, rows, vocab)).astype(np.float32))
        ex.poison()
        ex.write_inputs([x])
        order = _host_order(x[0, -1])
        (logits,) = ex.run([x])
        np.testing.assert_array_equal(logits, x)  # a call without a readout is as before
        (top1,) = ex.run([x], readout=1)
        assert int(top1) == order[0] == int(np.argmax(x[0, -1]))
        words = ex.run([x], readout=ks[1])
        assert words.dtype == np.uint32 and words.size == 2 * ks[1]
        c = Candidates.from_words(words, ks[1])
        assert c.ids == order[: ks[1]], f"first mismatch at {_first_diff(c.ids, order)}"
        np.testing.assert_array_equal(np.float32(c.logits), x[0, -1, c.ids])
        np.testing.assert_array_equal(words, readout_words(x, ks[1]))  # the numpy reference


def _first_diff(a, b):
    return next((i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)


def test_passes_take_any_vocabulary_to_one_tile():
    assert passes(49152, 64) == [(49152, 48), (3072, 3), (192, 1)]
    assert passes(49152, 1) == [(49152, 48), (48, 1)]
    assert passes(262144, 64)[-1][1] == 1


@pytest.mark.parametrize("options", [
    SamplingOptions(),
    SamplingOptions(temperature=0.8, top_k=40, seed=3),
    SamplingOptions(temperature=1.3, top_k=64, top_p=0.7, seed=11),
    SamplingOptions(temperature=0.5, top_k=1, seed=1),
])
def test_sampler_picks_the_same_tokens_from_candidates(rng, options):
    full, cand = Sampler(options), Sampler(options)
    k = cand.readout([1, CANDIDATES])
    assert k == (1 if options.temperature == 0 or options.top_k == 1 else CANDIDATES)
    for _ in range(30):
        x = _tied_logits(rng, 1, 3001) + rng.standard_normal((1, 1, 3001)).astype(np.float32)
        words = readout_words(x, k)
        assert cand(Candidates.from_words(words, k)) == full(x.reshape(-1))


@pytest.mark.parametrize("options", [
    SamplingOptions(temperature=0.7),                      # the whole vocabulary
    SamplingOptions(temperature=0.7, top_p=0.9),
    SamplingOptions(temperature=0.7, top_k=65),            # more than the readout holds
    SamplingOptions(repetition_penalty=1.3),               # reorders the scores
])
def test_sampler_asks_for_the_whole_row_when_candidates_are_not_exact(options):
    assert Sampler(options).readout([1, CANDIDATES]) is None


def _decoder_calls(prog, rng, starts):
    emb, pos = prog.plan.inputs
    return [[rng.standard_normal(emb.shape).astype(np.float32), np.array([s], np.int64)]
            for s in starts]


def test_prefill_in_one_submit_and_decoder_readouts(gpu, rng):
    from webpte import Program

    fixture = FIXTURES / "decoder_q8_tiny.pte"
    seq, batched = Program(fixture), Program(fixture)
    calls = _decoder_calls(seq, rng, [0, 4, 8, 10])
    for c in calls:
        (want,) = seq.run(*c)
    (got,) = batched.run_calls(calls)
    np.testing.assert_array_equal(got, want)
    step = _decoder_calls(seq, rng, [11])
    (want,) = seq.run(*step[0])
    (top1,) = batched.run_calls(step, readout=1)
    assert int(top1) == _host_order(want[0])[0]
    with pytest.raises(InputError, match="readouts"):
        batched.run_calls(step, readout=7)


def test_reference_backend_gives_the_same_readout(gpu, rng):
    from webpte import Program

    fixture = FIXTURES / "decoder_q8_tiny.pte"
    gpu_prog, ref = Program(fixture), Program(fixture, backend="reference")
    calls = _decoder_calls(gpu_prog, rng, [0, 3])
    k = gpu_prog.readouts[-1]
    np.testing.assert_array_equal(ref.run_calls(calls, readout=1),
                                  gpu_prog.run_calls(calls, readout=1))
    assert json.dumps(ref.readouts) == json.dumps(gpu_prog.readouts) and k == 64


@pytest.mark.parametrize("variant", TOPK_VARIANTS)
def test_readouts_order_nan_inf_and_signed_zero_as_the_reference(gpu, rng, variant):
    from webpte.native import Executor

    x = rng.standard_normal((1, 1, 3000)).astype(np.float32)
    x[0, 0, rng.integers(0, 3000, 40)] = np.nan
    x[0, 0, [7, 2999]] = np.inf
    x[0, 0, [11, 12]] = -np.inf
    x[0, 0, [100, 5]] = [-0.0, 0.0]
    ex = Executor(_logits_plan(x.shape, [TOPK_HINT + variant]))
    ex.write_inputs([x])
    for k in (1, CANDIDATES):
        words = ex.run([x], readout=k)
        np.testing.assert_array_equal(words, readout_words(x, k))
    assert int(ex.run([x], readout=1)[0]) == 7   # the first +inf


def test_gpu_adapters_get_the_bitonic_readout():
    from webpte.planner.hints import adapter_hints

    assert TOPK_HINT + "bitonic" in adapter_hints("DiscreteGPU")
    assert not any(h.startswith(TOPK_HINT) for h in adapter_hints("CPU"))
    plan = _logits_plan((1, 1, 5000), adapter_hints("IntegratedGPU"))
    assert [d.workgroups for d in plan.readouts[1].dispatches] == [(5, 1, 1), (1, 1, 1)]


def test_lane_runs_stay_within_llvmpipes_loop_budget():
    # 1024 ascending logits put every entry at the front of a 64-list: 65,536 loop
    # iterations in one invocation, past the 65,535 after which llvmpipe ends loops silently.
    assert lane_chunk(64) == 512 and lane_chunk(1) == 1024
    for k in (1, 8, 64):
        assert lane_chunk(k) * (k + 1) + 2 * k <= LOOP_BUDGET


@pytest.mark.parametrize("vocab", [2048, 5003])
def test_ascending_logits_give_the_hosts_top64_on_lanes(gpu, vocab):
    """Every logit larger than the ones before (the insertion sort's worst case): the ids
    were wrong on lavapipe with runs of 1024."""
    from webpte.native import Executor

    x = np.arange(vocab, dtype=np.float32).reshape(1, 1, vocab)
    plan = _logits_plan((1, 1, vocab), [TOPK_HINT + "lanes"])
    ex = Executor(Plan.from_json(plan.to_json()))
    k = plan.readouts[1].k
    got = Candidates.from_words(ex.run([x], readout=k), k)
    assert list(got.ids) == list(_host_order(x[0, -1])[:k])
