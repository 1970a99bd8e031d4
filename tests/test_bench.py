"""webpte bench --roofline: counted work, floors, the report and table, the probe kernels."""

import numpy as np

from test_fusion_q8 import _pair_graph
from webpte.bench import format_roofline
from webpte.kernels.render import render
from webpte.planner import lower
from webpte.roofline import best_ceilings, dispatch_work, family, measure_ceilings, report

CEILINGS = {"read_gbps": 2.0, "dot_gmacs": 10.0, "dot": "portable"}


def test_counted_and_bound_work():
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    plan = lower(g, fuse=False)     # two linears (counted) and the add (bound buffers)
    works = [dispatch_work(plan, d) for d in plan.dispatches]
    # One column an invocation: each of the 5 loads all of x.
    assert works[0] == (5 * 36 + 4 * 36 + 4 * 5 * 2, 4 * 5 * 36, True,
                        5 * 36 + 5 * 4 * 36 + 4 * 5 * 2)
    add = plan.dispatches[2]
    bound = sum(plan.buffers[b].size for b in set(add.bindings))
    assert works[2] == (bound, 0, False, bound)
    assert [family(plan, d) for d in plan.dispatches][:2] == ["linear_q8_skinny"] * 2


def test_report_floor_is_the_slower_ceiling():
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    plan = lower(g)
    (d,) = plan.dispatches
    nbytes, macs, _, loaded = dispatch_work(plan, d)
    assert loaded == nbytes   # 5 columns: one invocation of the dual kernel loads x once
    floor = max(nbytes / 2e9, macs / 10e9)
    rep = report(plan, CEILINGS, [2 * floor, 4 * floor, 3 * floor],
                 {"linear_q8_dual": 2 * floor})
    assert rep["call"]["pct_floor"] == 33.3           # median of the call times
    assert rep["call"]["time_ms_min"] == round(2e3 * floor, 2)
    assert rep["call"]["pct_floor_best"] == 50.0      # the fastest call
    fam = rep["families"]["linear_q8_dual"]
    assert fam["pct_floor"] == 50.0 and fam["dispatches"] == 1
    assert fam["gmac"] == round(macs / 1e9, 3)
    assert "dispatch_ms" not in rep["call"]           # no dispatch probe, no such figure
    with_probe = report(plan, {**CEILINGS, "dispatch_us": 1e6 * floor}, [4 * floor], {})
    assert with_probe["call"]["dispatch_ms"] == round(1e3 * floor, 2)
    assert with_probe["call"]["pct_floor_with_dispatches"] == 50.0   # (floor + 1 dispatch) / 4
    text = format_roofline([{"program": "p.pte", "adapter": "cpu", "driver": "lavapipe",
                             "variants": {"skinny": rep, "splitk": rep},
                             "ratios": {"splitk": 1.0}}])
    assert "lavapipe: cpu | p.pte" in text and "time splitk / skinny: 1.0" in text
    assert "skinny fastest call: " in text and "50.0% of floor" in text
    assert "linear_q8_dual" in text
    serial = nbytes / 2e9 + macs / 10e9
    assert fam["serial_floor_ms"] == round(1e3 * serial, 2)
    assert fam["pct_serial_floor"] == round(100 * serial / (2 * floor), 1)
    assert with_probe["call"]["pct_serial_floor_with_dispatches"] == round(
        100 * (serial + floor) / (4 * floor), 1)


def test_loads_count_each_invocations_x():
    """The dual decode kernel loads x once per invocation (8 columns each on CPU adapters),
    the split-K kernel once per workgroup: bytes_loaded counts each load."""
    from webpte.kernels.quantized.linear_q8 import DECODE_VARIANTS

    m, k, n = 4, 64, 20
    g, _ = _pair_graph(m=m, k=k, n=n, bias=False)
    x2 = 2 * m * k                   # both passes' int8 x
    for variant in ("skinny", "splitk"):
        plan = lower(g, features=[f"q8_decode:{variant}"])
        (d,) = plan.dispatches
        nbytes, macs, counted, loaded = dispatch_work(plan, d)
        assert counted and macs == 2 * m * n * k and nbytes == n * k + x2 + 8 * n
        groups = d.workgroups[0] * d.workgroups[1] * d.workgroups[2]
        loads = -(-n // DECODE_VARIANTS["skinny"]["cols"]) if variant == "skinny" else groups
        assert loads > 1 and loaded == n * k + loads * x2 + 8 * n, variant


def test_probe_templates_render():
    src = render("bench/stream_read", workgroup=256, row=512, invocations=512, iters=3,
                 strided=True)
    assert "src[g + j * 512u]" in src
    src = render("bench/int8_dot", workgroup=256, row=256, invocations=256, dot4=True,
                 fdot=False, chains=2, iters=5)
    assert src.startswith("requires packed_4x8_integer_dot_product;")
    assert "acc1 += dot4I8Packed(w1, v);" in src
    portable = render("bench/int8_dot", workgroup=256, row=256, invocations=256, dot4=False,
                      fdot=False, chains=2, iters=5)
    assert "let u = unpack(v);" in portable and "acc1 += dot(w1, u);" in portable
    f32 = render("bench/int8_dot", workgroup=256, row=256, invocations=256, dot4=False,
                 fdot=True, chains=2, iters=5)
    assert "let u = vec4<f32>(unpack(v));" in f32 and "acc1 += i32(f1);" in f32
    assert "@workgroup_size(32)" in render("bench/dispatch", workgroup=32)


def test_ceilings_are_measured(gpu):
    from webpte.native import wgsl_features

    c = measure_ceilings(wgsl_features(), tries=1, repeats=1, read_mib=4, dot_iters=16)
    assert all(np.isfinite(c[k]) and c[k] > 0 for k in
               ("read_gbps_strided", "read_gbps_chunked", "read_gbps", "dot_gmacs"))
    assert c["read_gbps"] == max(c["read_gbps_strided"], c["read_gbps_chunked"])
    dots = [v for k, v in c.items() if k.startswith("dot_gmacs_")]
    assert 0 < c["dispatch_us"] < 1e4
    assert c["dot_gmacs"] == max(dots) and len(dots) == (
        3 if "packed_4x8_integer_dot_product" in wgsl_features() else 2)


def test_best_ceilings_keep_each_fastest_probe():
    a = {"read_gbps": 2.0, "read_gbps_strided": 2.0, "read_gbps_chunked": 1.0,
         "dot_gmacs_dot4": 9.0, "dot_gmacs_unpacked": 5.0, "dot_gmacs": 9.0,
         "dot": "dot4I8Packed"}
    b = {"read_gbps": 1.5, "read_gbps_strided": 1.5, "read_gbps_chunked": 1.2,
         "dot_gmacs_dot4": 8.0, "dot_gmacs_unpacked": 11.0, "dot_gmacs": 11.0,
         "dot": "portable"}
    # Per probe its best (the least dispatch cost); the dot ceiling is the faster dot's.
    assert best_ceilings({**a, "dispatch_us": 50.0}, {**b, "dispatch_us": 40.0})[
        "dispatch_us"] == 40.0
    assert best_ceilings(a, b) == {"read_gbps": 2.0, "read_gbps_strided": 2.0,
                                   "read_gbps_chunked": 1.2, "dot_gmacs_dot4": 9.0,
                                   "dot_gmacs_unpacked": 11.0, "dot_gmacs": 11.0,
                                   "dot": "portable"}
