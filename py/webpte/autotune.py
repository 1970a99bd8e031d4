"""A short measured choice of the decode kernel variant at load, cached per adapter and program.

The planner's hints (planner/hints.py) pick a decode linear per adapter type from measurements
on a few adapters; a device it was not measured on may do better with another. With
`load(..., autotune=True)` (or WEBPTE_AUTOTUNE=1) a program whose plan has few-row int8
linears is planned once per candidate variant of its adapter type (CANDIDATES: decode
kernels, and on CPU adapters the f32 products on and off), each timed
over a few calls after a warm one in two rounds, one executor at a time (a candidate's buffers are
released before the next is made), and the fastest variant's hint is planned. Every variant
computes the same int32 accumulators and epilogues (tests/test_op_q8_splitk.py), so the
choice changes the speed, not the outputs.

The choice is kept in a JSON file (WEBPTE_AUTOTUNE_CACHE, default
~/.cache/webpte/autotune.json) keyed by the adapter (vendor, device, driver) and the
SHA-256 of the program file and method, with the times it was made from; a later load
reads it instead of measuring (and plans nothing for it). Programs whose plan needs more
than MAX_BYTES of device memory are not tuned (each candidate would upload the weights
again).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path

# Variants as `webpte bench --variants` names them (plan.hints.variant_features): a decode
# kernel, with "+" other hints. On CPU adapters the f32 products (q8_f32) won on one machine
# (0.96-0.975x the time of the int dot) and lost on another (1.10-1.15x), so both are timed;
# candidates that plan the same kernels as an earlier one (no dual kernel takes the f32 path:
# K % 16 != 0) are timed once, under the first's name.
CANDIDATES = {"CPU": ("skinny", "skinny+q8_f32:on", "skinny+q8_f32:off", "skinny8"),
              "GPU": ("splitk", "splitk16", "skinny")}
DECODE_FAMILIES = ("linear_q8_dual", "linear_q8_skinny", "linear_q8_splitk")
MAX_BYTES = 2 << 30
CALLS = 3
ENV = "WEBPTE_AUTOTUNE"


def cache_path() -> Path:
    return Path(os.environ.get("WEBPTE_AUTOTUNE_CACHE")
                or Path.home() / ".cache" / "webpte" / "autotune.json")


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}   # a missing or damaged cache is measured again, then rewritten


def _write_cache(path: Path, cache: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    tmp.replace(path)   # atomic: a concurrent reader sees the old file or the new one


def cache_key(data, method: str, info: dict) -> str:
    """Adapter (vendor, device, driver description) and SHA-256 of the program (`data`: its
    bytes, or a list of the .pte's then each data file's, hashed one after the other) and
    method."""
    h = hashlib.sha256()
    for source in data if isinstance(data, list) else [data]:
        view = memoryview(source)
        for start in range(0, len(view), 1 << 24):
            h.update(view[start:start + (1 << 24)])
    adapter = "|".join(str(info.get(k, "")) for k in ("vendor", "device", "description"))
    return f"{adapter}|{h.hexdigest()}|{method}"


def _has_decode_linears(plan) -> bool:
    return any(k.name.rsplit("_", 1)[0] in DECODE_FAMILIES for k in plan.kernels)


def _time(plan, data, calls: int) -> float:
    """Median seconds of `calls` calls of `plan` after a warm one (compiles the pipelines)."""
    import numpy as np

    from .native import Executor
    from .plan.io import sample_inputs

    ex = Executor(plan, data)
    try:
        arrays = sample_inputs(plan, np.random.default_rng(0))
        ex.run(arrays)
        times = []
        for _ in range(calls):
            ex.reset()
            t = time.perf_counter()
            ex.run(arrays)
            times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        for b in ex.buffers:
            b.destroy()


def tuned_features(prog, data, method: str, features, *, plan_method,
                   calls: int | None = None) -> frozenset[str]:
    """`features` with the decode variant measured fastest on this adapter for this program
    (read from the cache when it was measured before); unchanged for a plan with no few-row
    int8 linears or above MAX_BYTES. Candidates are timed in two rounds, the second in
    reverse order (the first executor made also warms the device), each keeping its best.
    `plan_method(prog, method, features)` plans a candidate (webpte.program.plan_method)."""
    from .native import adapter_info
    from .planner.hints import variant_features

    calls = calls or CALLS
    info = adapter_info()
    kind = "CPU" if info.get("adapter_type") == "CPU" else "GPU"
    path = cache_path()
    cache = _read_cache(path)
    key = cache_key(data, method, info)
    entry = cache.get(key)
    variant = entry.get("variant") if isinstance(entry, dict) else None
    if variant in CANDIDATES[kind]:   # measured before: no plan is made here
        return variant_features(features, variant)
    base = plan_method(prog, method, features)
    if not _has_decode_linears(base) or base.memory()["total"] > MAX_BYTES:
        return frozenset(features)
    plans, seen = {}, set()
    for v in CANDIDATES[kind]:
        tuned = variant_features(features, v)
        plan = base if tuned == frozenset(features) else plan_method(prog, method, tuned)
        kernels = tuple(k.name for k in plan.kernels)   # names hold the source's hash
        if kernels not in seen:
            seen.add(kernels)
            plans[v] = plan
    names = list(plans)
    times: dict[str, float] = {}
    for order in (names, names[::-1]):
        for v in order:
            times[v] = min(times.get(v, float("inf")), _time(plans[v], data, calls))
    variant = min(times, key=times.get)
    cache[key] = {"variant": variant, "calls": calls,
                  "times_ms": {v: round(1e3 * t, 3) for v, t in times.items()},
                  "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    _write_cache(path, cache)
    return variant_features(features, variant)
