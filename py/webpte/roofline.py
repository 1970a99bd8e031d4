"""Roofline of a plan on this adapter: measured ceilings, counted work, time against floor.

Ceilings come from webpte's own probe kernels (shaders/bench/): streaming read bandwidth
(two access patterns, the faster counts) and int8 dot throughput, with dot4I8Packed where the
device has it and with the portable unpack + i32 or f32 dot (the fastest counts: SwiftShader's
portable dots beat its dot4I8Packed, and its plans use them, plan/hints.DRIVER_HINTS). A
dispatch's work is what its unit counted (`DispatchSpec.cost`: bytes read, int8 MACs) or,
uncounted, the bytes of the buffers it binds, state buffers (KV caches) left out since a
decode step reads only the filled part. Its floor is
max(bytes / read bandwidth, MACs / dot rate); a call's floor is the sum over dispatches.

A second, serial floor follows how CPU adapters (lavapipe, SwiftShader) run a kernel: every
lane's loads one after another, the repeated ones too (a decode linear's x is loaded again
by every invocation: `bytes_loaded` in the cost), then its arithmetic, unoverlapped:
bytes loaded / read bandwidth + MACs / dot rate. On lavapipe a 4-row dual linear with x
computed instead of loaded took 0.58-0.76x the time, on SwiftShader 0.54x: the share of
those loads, though every lane loads the same addresses.
"""

from __future__ import annotations

import statistics
import time

from .kernels.render import render
from .plan.model import BufferSpec, DispatchSpec, IOSpec, KernelSpec, Plan

__all__ = ["DISPATCH", "DOT_NAMES", "best_ceilings", "ceiling_probes", "ceilings_from",
           "dispatch_work", "family", "family_times", "measure_ceilings", "report"]

DOT4 = "packed_4x8_integer_dot_product"
READ_MIB = 64        # larger than the CPU caches; one probe dispatch reads it once
READ_INVOCATIONS = 65536
DOT_INVOCATIONS = 16384
DOT_CHAINS = 8
DOT_ITERS = 1024
DISPATCHES = 400     # the dispatch probe: one small workgroup, this many times in one submit
DISPATCH = "dispatch_us"   # its ceiling: microseconds a dispatch (a cost: lower is better)
DOTS = ("dot4", "unpacked", "f32")   # the int8 dot probes (kernels/quantized/linear_q8.DOT_HINT)
DOT_NAMES = {"dot4": "dot4I8Packed", "unpacked": "portable", "f32": "portable f32"}


def _probe_plan(template: str, src_words: int, invocations: int, repeats: int,
                workgroup: int = 256, **params) -> Plan:
    """One probe kernel dispatched `repeats` times over a zeroed source buffer."""
    groups = invocations // workgroup
    wgsl = render(f"bench/{template}", workgroup=workgroup, row=groups * workgroup,
                  invocations=invocations, **params)
    buffers = [BufferSpec(0, 4 * src_words, "constant", "src", {"kind": "zeros"}),
               BufferSpec(1, 4 * invocations, "output", "out")]
    dispatch = DispatchSpec(0, [0, 1], (groups, 1, 1), f"probe:{template}")
    features = [DOT4] if params.get("dot4") else []
    return Plan("probe", buffers, [KernelSpec(0, template, wgsl)], [dispatch] * repeats, [],
                [IOSpec(1, "int32", (invocations,), "i32")],
                limits={"max_buffer_size": 4 * src_words,
                        "max_storage_buffer_binding_size": 4 * src_words},
                features=features)


def _best_seconds(plan: Plan, tries: int) -> float:
    from .native import Executor

    ex = Executor(plan)
    ex.run([])  # compiles and warms
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        ex.run([])
        best = min(best, time.perf_counter() - t)
    return best


def ceiling_probes(features, repeats: int = 4, read_mib: int = READ_MIB,
                   dot_iters: int = DOT_ITERS) -> list[tuple[str, Plan, int]]:
    """(name, probe plan, work: bytes read or int8 MACs) of each ceiling probe for a device
    with the WGSL `features`; natively or in the page, each is timed best of a few calls."""
    words = read_mib * 2**20 // 4
    iters = words // 4 // READ_INVOCATIONS
    probes = [(f"read_gbps_{pattern}",
               _probe_plan("stream_read", words, READ_INVOCATIONS, repeats, iters=iters,
                           strided=pattern == "strided"), repeats * 4 * words)
              for pattern in ("strided", "chunked")]
    for dot in DOTS if DOT4 in features else DOTS[1:]:
        probes.append((f"dot_gmacs_{dot}",
                       _probe_plan("int8_dot", DOT_CHAINS + 1, DOT_INVOCATIONS, 1,
                                   dot4=dot == "dot4", fdot=dot == "f32", chains=DOT_CHAINS,
                                   iters=dot_iters),
                       DOT_INVOCATIONS * DOT_CHAINS * dot_iters * 4))
    probes.append((DISPATCH, _probe_plan("dispatch", 1, 32, DISPATCHES, workgroup=32),
                   DISPATCHES))
    return probes


def _overall(out: dict) -> dict:
    """The read and dot ceilings as the faster of their probes (`dot` names the dot's)."""
    out["read_gbps"] = max(out["read_gbps_strided"], out["read_gbps_chunked"])
    dots = [d for d in DOTS if f"dot_gmacs_{d}" in out]
    best = max(dots, key=lambda d: out[f"dot_gmacs_{d}"])
    out["dot_gmacs"], out["dot"] = out[f"dot_gmacs_{best}"], DOT_NAMES[best]
    return out


def ceilings_from(probes: list[tuple[str, Plan, int]], seconds: dict[str, float]) -> dict:
    """Ceilings (GB/s, GMAC/s) from each probe's best time in `seconds`."""
    out: dict = {name: round(1e6 * seconds[name] / work, 2) if name == DISPATCH
                 else round(work / seconds[name] / 1e9, 3) for name, _, work in probes}
    return _overall(out)


def measure_ceilings(features, tries: int = 3, **probe_args) -> dict:
    """Streaming read GB/s (strided and chunked patterns) and int8 GMAC/s on this device."""
    probes = ceiling_probes(features, **probe_args)
    return ceilings_from(probes, {name: _best_seconds(plan, tries) for name, plan, _ in probes})


def best_ceilings(*measured: dict) -> dict:
    """Per ceiling the best of several measurements (probes run before and after the calls):
    on a shared machine the fastest probe run is the closest to what the adapter can do."""
    out = dict(measured[0])
    for m in measured[1:]:
        out.update({k: (min if k == DISPATCH else max)(v, out[k])
                    for k, v in m.items() if isinstance(v, float) and k in out})
    return _overall(out)


def dispatch_work(plan: Plan, d: DispatchSpec) -> tuple[int, int, bool, int]:
    """(bytes, int8 MACs, counted by its unit, bytes loaded by its invocations) of one
    dispatch; the bytes loaded are the bytes read where the unit counted no more."""
    if d.cost:
        nbytes = int(d.cost.get("bytes_read", 0))
        return nbytes, int(d.cost.get("macs", 0)), True, int(d.cost.get("bytes_loaded",
                                                                         nbytes))
    bound = {b for b in d.bindings if plan.buffers[b].role != "state"}
    nbytes = sum(plan.buffers[b].size for b in bound)
    return nbytes, 0, False, nbytes


def family(plan: Plan, d: DispatchSpec) -> str:
    """The kernel's template name (its rendered name less the source hash)."""
    return plan.kernels[d.kernel].name.rsplit("_", 1)[0]


def family_times(ex, tries: int = 3) -> dict[str, float]:
    """Seconds of each kernel family's dispatches, all of them in one submit (after a full
    call, so every pipeline is compiled); the best of `tries`, less an empty submit's."""
    plan = ex.plan
    first = ex.buffers[plan.outputs[0].buffer]
    fams: dict[str, list[int]] = {}
    for i, d in enumerate(plan.dispatches):
        fams.setdefault(family(plan, d), []).append(i)

    def submit(idx: list[int]) -> float:
        t = time.perf_counter()
        enc = ex.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        for i in idx:
            d = plan.dispatches[i]
            cpass.set_pipeline(ex.pipelines[d.kernel])
            cpass.set_bind_group(0, ex.bind_groups[i])
            cpass.dispatch_workgroups(*d.workgroups)
        cpass.end()
        ex.device.queue.submit([enc.finish()])
        ex.device.queue.read_buffer(first, 0, 4)  # waits for the queue to drain
        return time.perf_counter() - t

    # A submit and its wait cost the same with no dispatch: taken off every family.
    overhead = min(submit([]) for _ in range(tries))
    return {name: max(0.0, min(submit(idx) for _ in range(tries)) - overhead)
            for name, idx in fams.items()}


def _floor(nbytes: int, macs: int, ceilings: dict) -> float:
    return max(nbytes / (ceilings["read_gbps"] * 1e9), macs / (ceilings["dot_gmacs"] * 1e9))


def _serial_floor(loaded: int, macs: int, ceilings: dict) -> float:
    return loaded / (ceilings["read_gbps"] * 1e9) + macs / (ceilings["dot_gmacs"] * 1e9)


def report(plan: Plan, ceilings: dict, call_times: list[float],
           fam_times: dict[str, float]) -> dict:
    """Per call and per kernel family: time, floor and percent of floor (floor / time; the
    call's median and, as pct_floor_best, its fastest time; families: best of a few)."""
    fams: dict[str, dict] = {}
    zero = {"bytes": 0, "macs": 0, "floor_s": 0.0, "loaded": 0, "serial_s": 0.0}
    total = {**zero, "uncounted_bytes": 0}
    for d in plan.dispatches:
        nbytes, macs, counted, loaded = dispatch_work(plan, d)
        f = fams.setdefault(family(plan, d), {"dispatches": 0, **zero})
        floor = _floor(nbytes, macs, ceilings)
        serial = _serial_floor(loaded, macs, ceilings)
        for entry in (f, total):
            entry["bytes"] += nbytes
            entry["macs"] += macs
            entry["floor_s"] += floor
            entry["loaded"] += loaded
            entry["serial_s"] += serial
        f["dispatches"] += 1
        if not counted:
            total["uncounted_bytes"] += nbytes
    call_s = statistics.median(call_times)
    rows = {}
    for name, f in sorted(fams.items(), key=lambda kv: -fam_times.get(kv[0], 0.0)):
        t = fam_times.get(name)
        rows[name] = {"dispatches": f["dispatches"], "mb": round(f["bytes"] / 1e6, 2),
                      "gmac": round(f["macs"] / 1e9, 3),
                      "time_ms": None if t is None else round(1e3 * t, 2),
                      "floor_ms": round(1e3 * f["floor_s"], 2),
                      "pct_floor": None if not t else round(100 * f["floor_s"] / t, 1),
                      "loaded_mb": round(f["loaded"] / 1e6, 2),
                      "serial_floor_ms": round(1e3 * f["serial_s"], 2),
                      "pct_serial_floor": None if not t else round(100 * f["serial_s"] / t,
                                                                   1)}
    return {"ceilings": ceilings,
            "call": {"dispatches": len(plan.dispatches), "mb": round(total["bytes"] / 1e6, 2),
                     "uncounted_mb": round(total["uncounted_bytes"] / 1e6, 2),
                     "gmac": round(total["macs"] / 1e9, 3),
                     "time_ms": round(1e3 * call_s, 2),
                     "time_ms_min": round(1e3 * min(call_times), 2),
                     "floor_ms": round(1e3 * total["floor_s"], 2),
                     "pct_floor": round(100 * total["floor_s"] / call_s, 1),
                     "pct_floor_best": round(100 * total["floor_s"] / min(call_times), 1),
                     "loaded_mb": round(total["loaded"] / 1e6, 2),
                     "serial_floor_ms": round(1e3 * total["serial_s"], 2),
                     "pct_serial_floor": round(100 * total["serial_s"] / call_s, 1),
                     **_with_dispatches(len(plan.dispatches), {
                         "floor": total["floor_s"], "serial_floor": total["serial_s"]},
                         call_s, ceilings)},
            "families": rows}


def _with_dispatches(n: int, floors: dict[str, float], call_s: float, ceilings: dict) -> dict:
    """Each floor (name: seconds) with each dispatch's fixed cost added (the dispatch probe's),
    where measured: what a plan of this many dispatches could reach on this adapter."""
    if DISPATCH not in ceilings:
        return {}
    dispatch_s = n * ceilings[DISPATCH] / 1e6
    return {"dispatch_ms": round(1e3 * dispatch_s, 2),
            **{f"pct_{name}_with_dispatches": round(100 * (s + dispatch_s) / call_s, 1)
               for name, s in floors.items()}}
