"""Compile manifests in the shape of seed 000 (shared/docs/gemma4-31b.md): one entry per
program method of a `.pte` or a model folder, with its inputs and outputs, the device bytes
its plan needs, and whether it runs as one device function with no host graph breaks.

    {"metadata": {"<file>": {"name", "inputs": [{name, shape, dtype}], "outputs": [...],
                             "alloc_per_node": [device bytes], "num_devices": 1,
                             "device": "webgpu", "compiler": "webpte <version>",
                             "subgraph": {"stats": [{"compile_id", "device_func_count",
                                                      "host_op_reason": {op: reason}}]}}},
     "graphs_with_breaks": ["<file>", ...], "policy": POLICY}

`device_func_count` is 1 when the whole method is one plan (one submit) on the device;
`host_op_reason` names each op that keeps it from that and why (no kernel, a host kernel
call between delegates, a planning error). No GPU is needed: plans are made, nothing runs.
"""

from __future__ import annotations

from pathlib import Path

from .errors import WebpteError

POLICY = "One device function (one plan, one submit) per program method; no host graph breaks"


def _io(specs) -> list[dict]:
    return [{"name": s.name or f"{s.kind}_{i}", "shape": list(s.shape or []), "dtype": s.dtype}
            for i, s in enumerate(specs)]


def _method_entry(prog, name: str, compile_id: int) -> dict:
    """One method's entry, from the same description `webpte inspect` gives (describe):
    kernel calls between delegates run as webpte units in the method's one plan, so only
    calls no unit runs, missing kernels and planning errors are breaks."""
    from . import __version__
    from .program import describe, plan_method

    m = prog.method(name)
    info = describe(prog)["methods"][name]
    reasons: dict[str, str] = {}
    for op in info["host_graph_breaks"]:
        reasons[op] = "a kernel call outside the delegates that no webpte unit runs"
    for op in info["unsupported_ops"]:
        reasons.setdefault(op, "webpte has no kernel for it")
    if "plan_error" in info:
        reasons["plan_error"] = info["plan_error"][:300]
    alloc = 0
    if not reasons:
        try:
            alloc = plan_method(prog, name).memory()["total"]
        except WebpteError as e:
            reasons[type(e).__name__] = str(e)[:300]
    stats = {"compile_id": compile_id, "device_func_count": 0 if reasons else 1,
             "host_op_reason": reasons, "delegate_calls": info["delegate_calls"],
             "host_kernel_calls_on_device": 0 if reasons else info["host_kernel_calls"]}
    return {"name": name, "inputs": _io(m.inputs), "outputs": _io(m.outputs),
            "alloc_per_node": [alloc], "num_devices": 1, "device": "webgpu",
            "compiler": f"webpte {__version__}", "subgraph": {"stats": [stats]}}


def program_entries(path: Path, key: str, start_id: int = 0) -> dict[str, dict]:
    """Entries of every non-constant method of the program at `path` (`key`, or
    `key#method` for methods other than forward)."""
    from .program import _source
    from .pte import read_program

    data, _ = _source(path)
    prog = read_program(data)
    out = {}
    for name, m in prog.methods.items():
        if m.is_constant:
            continue
        entry_key = key if name == "forward" else f"{key}#{name}"
        out[entry_key] = _method_entry(prog, name, start_id + len(out))
    return out


def seed000_manifest(path) -> dict:
    """The manifest of a `.pte` file or of every program of a model folder."""
    path = Path(path).expanduser()
    if path.is_dir():
        from .host.files import resolve_model_folder

        files = resolve_model_folder(path, verify=False)
        programs = [p for p in (files.vision, files.decoder) if p is not None]
    else:
        programs = [path]
        path = path.parent
    metadata: dict[str, dict] = {}
    for p in programs:
        metadata.update(program_entries(p, p.relative_to(path).as_posix(), len(metadata)))
    breaks = [k for k, v in metadata.items()
              if any(s["host_op_reason"] for s in v["subgraph"]["stats"])]
    return {"metadata": metadata, "graphs_with_breaks": breaks, "policy": POLICY}
