"""Shared checks: compare arrays with stated tolerances and readable failures."""

from __future__ import annotations

import numpy as np

from webpte.kernels.reference import run_reference
from webpte.native import Executor
from webpte.planner import lower
from webpte.testing import rel_l2


def assert_close(actual, expected, *, rel: float = 1e-5, atol: float = 0.0, rtol: float = 0.0,
                 exact: bool = False, what: str = "output") -> None:
    """Shape, then dtype kind, then values: rel-L2 <= rel, or element-wise exact.

    Also every element within atol + rtol*|expected| when those are given, and never
    a NaN where the reference has a number (catches unwritten, poisoned elements).
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype.kind == expected.dtype.kind or {actual.dtype.kind,
                                                        expected.dtype.kind} <= set("iu"), \
        f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if exact:
        bad = actual != expected
    else:
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        bad = np.isnan(a) & ~np.isnan(e)
        if atol or rtol:
            bad |= ~(np.abs(a - e) <= atol + rtol * np.abs(e))
    if bad.any() or (not exact and rel_l2(actual, expected) > rel):
        idx = np.argwhere(bad)[:8] if bad.any() else np.argwhere(
            np.abs(actual.astype(np.float64) - expected) >= 0)[:0]
        lines = [f"  at {tuple(int(x) for x in i)}: expected {expected[tuple(i)]!r}, "
                 f"actual {actual[tuple(i)]!r}" for i in idx]
        if not exact:
            order = np.argsort(-np.abs(actual.astype(np.float64) - expected).ravel())[:5]
            lines += [f"  worst {np.unravel_index(o, actual.shape)}: expected "
                      f"{expected.ravel()[o]!r}, actual {actual.ravel()[o]!r}" for o in order]
        detail = f"rel-L2 {rel_l2(actual, expected):.3e} (limit {rel:.1e})" if not exact else \
            f"{int(bad.sum())} of {bad.size} elements differ"
        raise AssertionError(f"{what}: {detail}; first mismatches:\n" + "\n".join(lines))


def run_graph_both(graph, blob, inputs, *, poison: bool = True):
    """Run a graph natively (poisoned first) and in the numpy reference.

    `inputs` are arrays in graph input order. Returns (native outputs, reference outputs).
    """
    plan = lower(graph)
    ex = Executor(plan, blob)
    if poison:
        ex.poison()
    native = ex.run(inputs)
    env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob)
    ref = [env.get(v) for v in graph.output_ids]
    return native, ref


def assert_plans_bitwise(graph, blob, inputs, plans: dict, *, rel: float = 1e-6) -> list:
    """Run each plan of `plans` ({name: plan} of one graph) natively, poisoned first: every
    output bitwise the first plan's, and within `rel` of the numpy reference. Returns the
    first plan's outputs."""
    outs = {}
    for name, plan in plans.items():
        ex = Executor(plan, blob)
        ex.poison()
        outs[name] = ex.run(inputs)
    (first, base), *others = outs.items()
    env = run_reference(graph, dict(zip(graph.input_ids, inputs, strict=True)), blob)
    for i, a in enumerate(base):
        for name, out in others:
            assert a.tobytes() == out[i].tobytes(), f"output {i}: {first} differs from {name}"
        assert_close(a, env.get(graph.output_ids[i]), rel=rel, what=f"output {i} vs numpy")
    return base
