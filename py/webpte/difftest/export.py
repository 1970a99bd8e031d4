"""Eager outputs and ExecuTorch exports of a generated program (dev-only: imports torch and
executorch, lazily, so the runtime never needs them).

Ways a module is exported (ExecuTorch 1.5.1):
- webgpu: `to_edge_transform_and_lower(..., partitioner=[WebGPUPartitioner()])`
- portable: no partitioner, portable kernels only
- alias: `WebGPUPartitioner(compile_options={"alias_buffer_mutations": True})`, mutable
  buffers written inside the delegate
"""

from __future__ import annotations

import functools
import logging
import warnings

import numpy as np

WAYS = {"webgpu": {}, "portable": None, "alias": {"alias_buffer_mutations": True}}


class ExportFailed(Exception):
    """ExecuTorch could not export a generated module one way (not webpte's fault)."""


def have_exporter() -> str | None:
    """None when torch and executorch import, else why not."""
    try:
        import executorch.backends.webgpu.partitioner  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return f"difftest needs torch and executorch (the export extra): {e}"
    return None


def load_module(source: str, filename: str) -> dict:
    """The namespace of a program's source (build, make_inputs, CALLS, SEED)."""
    ns: dict = {"__name__": "difftest_program"}
    exec(compile(source, filename, "exec"), ns)
    return ns


def eager(ns: dict) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """(inputs, outputs) per call of a fresh module: calls run in order, so state written
    by one call is read by the next."""
    import torch

    module = ns["build"]()
    inputs, outputs = [], []
    with torch.no_grad():
        for call in range(ns["CALLS"]):
            args = ns["make_inputs"](call)
            outs = module(*[a.clone() for a in args])
            inputs.append([_numpy(a) for a in args])
            outputs.append([_numpy(o) for o in outs])
    return inputs, outputs


def _numpy(t) -> np.ndarray:
    return t.detach().contiguous().numpy().copy()


def export(ns: dict, way: str) -> bytes:
    """The .pte of a fresh module exported `way` (ExportFailed: ExecuTorch refused it)."""
    import torch
    from executorch.backends.webgpu.partitioner import WebGPUPartitioner
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )

    _quiet()
    options = WAYS[way]
    module = ns["build"]()
    example = tuple(ns["make_inputs"](0))
    try:
        ep = torch.export.export(module, example)
        partitioner = [] if options is None else [WebGPUPartitioner(compile_options=options)]
        # As tools/export_gemma4.py: the IR check rejects in-place index_put_ on buffers.
        edge = to_edge_transform_and_lower(ep, partitioner=partitioner,
                                           compile_config=EdgeCompileConfig(
                                               _check_ir_validity=False))
        return bytes(edge.to_executorch(ExecutorchBackendConfig()).buffer)
    except Exception as e:  # ExecuTorch's own failure on a valid module
        raise ExportFailed(f"{type(e).__name__}: {str(e).strip()}") from e


@functools.cache
def _quiet() -> None:
    """ExecuTorch's partitioner logs every op at INFO; and its fusable-pattern graphs are
    traced again on every partitioning (~3 s): traced once here, matching is read-only."""
    logging.getLogger().setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    from executorch.backends.vulkan.patterns import fusable_patterns

    for entry in fusable_patterns.values():
        if entry.get_graphs_fn is not None:
            entry.get_graphs_fn = functools.cache(entry.get_graphs_fn)
