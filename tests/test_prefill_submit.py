"""Host round trips of a conversation natively (tests/fixtures/tiny_vlm on wgpu-py): the
prompt's windows go in one submit, every decode step is one submit that creates no buffer
and no bind group and reads back only the sampled readout (a 4-byte id when greedy, 64 ids
and their logits when sampling top-k) instead of the vocabulary's logits. Counted by
wrapping the wgpu-py device, queue and buffer methods (as tests/test_soak.py does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webpte.host import SamplingOptions, load_model
from webpte.kernels.sampling.topk import CANDIDATES

FOLDER = Path(__file__).parent / "fixtures" / "tiny_vlm"
N_NEW = 6
QUESTION = "Say something long enough to need several windows of four rows."


@pytest.fixture(scope="module")
def model():
    import os

    if os.environ.get("WEBPTE_NO_GPU"):
        pytest.skip("WEBPTE_NO_GPU is set")
    return load_model(FOLDER)


def _counting(monkeypatch, ex) -> dict[str, int]:
    """Counters of the device's buffer and bind-group creations, the queue's submits and the
    bytes read back, from now on (undone by monkeypatch)."""
    counts = {"create_buffer": 0, "create_bind_group": 0, "submit": 0, "read_bytes": 0}
    mapping = []   # wgpu-py's map_async submits an empty command buffer of its own

    def wrap(cls, name, count=None, inside=None):
        real = getattr(cls, name)

        def counted(self, *a, **k):
            if inside is not None:
                inside.append(1)
            try:
                out = real(self, *a, **k)
            finally:
                if inside is not None:
                    inside.pop()
            if count is not None:
                count(out)
            return out

        monkeypatch.setattr(cls, name, counted)

    def add(key, n=lambda out: 1):
        def count(out):
            if not mapping:
                counts[key] += n(out)
        return count

    buffer_type = type(ex.staging[0])
    wrap(type(ex.device), "create_buffer", add("create_buffer"))
    wrap(type(ex.device), "create_bind_group", add("create_bind_group"))
    wrap(type(ex.device.queue), "submit", add("submit"))
    wrap(type(ex.device.queue), "read_buffer", add("read_bytes", len))
    wrap(buffer_type, "map_async", inside=mapping)
    wrap(buffer_type, "read_mapped", add("read_bytes", lambda out: memoryview(out).nbytes))
    return counts


@pytest.mark.parametrize("sampling,bytes_per_step", [
    (None, 4),
    (SamplingOptions(temperature=0.9, top_k=20, seed=5), 8 * CANDIDATES),
])
def test_one_submit_per_step_nothing_created_only_the_readout_read(gpu, model, monkeypatch,
                                                                   sampling, bytes_per_step):
    session = model.session()
    session.ask(QUESTION, max_new_tokens=N_NEW, sampling=sampling)   # load-time caches settle
    first = session.stats.token_ids
    session.reset()
    counts = _counting(monkeypatch, model.decoder.executor)
    session.ask(QUESTION, max_new_tokens=N_NEW, sampling=sampling)
    s = session.stats
    assert s.token_ids == first, "the same options gave other tokens"
    assert s.prefill_windows > 2, "the prompt should need several windows"
    fed = s.new_tokens   # every generated token went through the decoder (none stopped it)
    assert s.stop_reason == "max_new_tokens"
    assert counts == {"create_buffer": 0, "create_bind_group": 0,
                      "submit": 1 + fed, "read_bytes": bytes_per_step * (1 + fed)}, s


def test_the_whole_row_is_read_when_candidates_would_not_be_exact(gpu, model, monkeypatch):
    session = model.session()
    sampling = SamplingOptions(temperature=0.9, seed=5)   # no top_k: the whole vocabulary
    session.ask(QUESTION, max_new_tokens=2, sampling=sampling)
    session.reset()
    counts = _counting(monkeypatch, model.decoder.executor)
    session.ask(QUESTION, max_new_tokens=2, sampling=sampling)
    row = 4 * model.vocab
    assert counts["read_bytes"] == row * (1 + session.stats.new_tokens)
    assert counts["submit"] == 1 + session.stats.new_tokens
