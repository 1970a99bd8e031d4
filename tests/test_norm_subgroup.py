"""The redundant rms_norm's subgroup form (kernels/reduce/rms_norm.norm_form `shuffle`): the
same partial sums and adds as the loop form, each partial formed once a subgroup, so bitwise
the loop form for the norm alone and with its fused chain, on this adapter (lavapipe's 8-lane
subgroups) and, in a subprocess, on SwiftShader's ICD (4 lanes: two subgroups a workgroup,
half the tree in the lane)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

SWIFTSHADER_ICD = Path("/usr/lib/chromium/vk_swiftshader_icd.json")
LOOP = {"norm:redundant", "norm_shuffle:off"}
SHUFFLE = {"norm:redundant", "subgroups", "subgroups:implicit"}
SHAPES = [(3, 40), (4, 576), (2, 7), (1, 3), (5, 8)]


def _graph(shape, chain: bool):
    b = GraphBuilder()
    x = b.tensor(np.float32, shape)
    w = b.constant(np.random.default_rng(13).standard_normal(shape[-1]).astype(np.float32))
    n = b.tensor(np.float32, shape)
    b.op("et_vk.rms_norm.default", x, w, b.scalar(1e-6), n)
    if not chain:
        return b.build([x], [n])
    half, m, o = b.constant(np.array(0.37, np.float32)), *(b.tensor(np.float32, shape)
                                                            for _ in range(2))
    b.op("aten.mul.Tensor", n, half, m)
    b.op("aten.sub.Tensor", x, m, b.scalar(1), o)
    return b.build([x], [o])


def _outputs(shape, chain: bool, features) -> list[bytes]:
    from webpte.native import Executor

    g, blob = _graph(shape, chain)
    plan = lower(g, features=features)
    assert len(plan.dispatches) == 1
    assert ("subgroupShuffleDown" in plan.kernels[0].wgsl) == ("subgroups" in features)
    ex = Executor(plan, blob)
    ex.poison()
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 3).astype(np.float32)
    x[0, 0] = 1e-20   # a tiny square next to large ones
    return [a.tobytes() for a in ex.run([x])]


def _compare_all() -> dict:
    """{case: whether the two forms gave the same bytes} on this process's adapter."""
    return {f"{shape} chain={chain}": _outputs(shape, chain, SHUFFLE) ==
            _outputs(shape, chain, LOOP) for shape in SHAPES for chain in (False, True)}


def test_forms_render():
    g, _ = _graph((4, 576), True)
    loop = lower(g, features=LOOP).kernels[0].wgsl
    shuffle = lower(g, features=SHUFFLE).kernels[0].wgsl
    assert "subgroup" not in loop and "workgroupBarrier" not in loop
    assert "@builtin(subgroup_size) sg_size: u32" in shuffle and "workgroupBarrier" not in shuffle
    assert "enable subgroups;" not in shuffle   # naga takes the builtins without it
    page = lower(g, features=SHUFFLE - {"subgroups:implicit"}).kernels[0].wgsl
    assert page.startswith("enable subgroups;")
    assert lower(g, features=SHUFFLE).features == ["subgroups"]   # refused without them


def test_subgroup_form_is_the_loop_form_bitwise(gpu):
    from webpte.native.device import get_device

    if "subgroup" not in get_device().features:
        pytest.skip("this adapter has no subgroups")
    assert all(_compare_all().values())


@pytest.mark.skipif(not SWIFTSHADER_ICD.exists(), reason="no SwiftShader Vulkan ICD")
def test_subgroup_form_is_the_loop_form_bitwise_on_swiftshader(gpu):
    env = {**os.environ, "VK_ICD_FILENAMES": str(SWIFTSHADER_ICD)}
    code = ("import json, test_norm_subgroup as t\n"
            "from webpte.native.device import get_device\n"
            "print(json.dumps({'subgroups': 'subgroup' in get_device().features,"
            " 'same': t._compare_all() if 'subgroup' in get_device().features else {}}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=Path(__file__).parent, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not result["subgroups"]:
        pytest.skip("SwiftShader's ICD has no subgroups here")
    assert result["same"] and all(result["same"].values()), result
