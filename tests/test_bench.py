"""webpte bench --roofline: counted work, floors, the report and table, the probe kernels."""

import numpy as np

from test_fusion_q8 import _pair_graph
from webpte.bench import format_roofline
from webpte.kernels.render import render
from webpte.plan import lower
from webpte.roofline import best_ceilings, dispatch_work, family, measure_ceilings, report

CEILINGS = {"read_gbps": 2.0, "dot_gmacs": 10.0, "dot": "portable"}


def test_counted_and_bound_work():
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    plan = lower(g, fuse=False)     # two linears (counted) and the add (bound buffers)
    works = [dispatch_work(plan, d) for d in plan.dispatches]
    assert works[0] == (5 * 36 + 4 * 36 + 4 * 5 * 2, 4 * 5 * 36, True)
    add = plan.dispatches[2]
    assert works[2] == (sum(plan.buffers[b].size for b in set(add.bindings)), 0, False)
    assert [family(plan, d) for d in plan.dispatches][:2] == ["linear_q8_skinny"] * 2


def test_report_floor_is_the_slower_ceiling():
    g, _ = _pair_graph(m=4, k=36, n=5, bias=False)
    plan = lower(g)
    (d,) = plan.dispatches
    nbytes, macs, _ = dispatch_work(plan, d)
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
