"""Long sessions natively: decode steps of tests/fixtures/decoder_q8_tiny.pte on wgpu-py create
no GPU buffer and no bind group after load, and RSS stays flat. WEBPTE_SOAK_STEPS sets the
count (50 here, `make soak` runs 1,000); the figures are printed (`pytest -s`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).parent / "fixtures" / "decoder_q8_tiny.pte"
STEPS = int(os.environ.get("WEBPTE_SOAK_STEPS", "50"))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_decode_steps_create_nothing_and_keep_rss_flat(gpu, monkeypatch):
    from webpte import Program

    prog = Program(FIXTURE)
    plan = prog.plan
    pos_i, rows = prog._positions
    rng = np.random.default_rng(14)
    inputs = [rng.standard_normal(s.shape).astype(np.float32) if i != pos_i
              else np.zeros(s.shape, np.int64) for i, s in enumerate(plan.inputs)]
    device_type = type(prog.executor.device)
    created = {"create_buffer": 0, "create_bind_group": 0}
    for name in created:
        real = getattr(device_type, name)

        def counting(self, *a, _real=real, _name=name, **k):
            created[_name] += 1
            return _real(self, *a, **k)

        monkeypatch.setattr(device_type, name, counting)

    def step(i: int) -> None:
        pos = (i * rows) % (plan.max_context - rows + 1)
        if pos == 0:
            prog.reset()
        inputs[pos_i] = np.full(plan.inputs[pos_i].shape, pos, np.int64)
        (logits, *_) = prog.run(*inputs)
        assert np.isfinite(logits).all()

    warm = min(10, STEPS)
    for i in range(warm):  # the allocator and wgpu's caches settle
        step(i)
    rss0 = _rss_mb()
    for i in range(warm, STEPS):
        step(i)
    rss1 = _rss_mb()
    print(f"\nsoak: {STEPS} steps of {FIXTURE.name}, created after load {created}, "
          f"RSS {rss0:.1f} -> {rss1:.1f} MB ({rss1 - rss0:+.1f})")
    assert created == {"create_buffer": 0, "create_bind_group": 0}
    import wgpu

    prog.executor.device.create_buffer(size=4, usage=wgpu.BufferUsage.STORAGE).destroy()
    assert created["create_buffer"] == 1, "the counter sees the device's allocations"
    grew = rss1 - rss0
    assert grew < 16 + 0.02 * STEPS, f"RSS grew {grew:.1f} MB over {STEPS - warm} steps"
