"""Run generated programs: eager PyTorch, ExecuTorch exports (ways), webpte on the GPU and on
its numpy interpreter; classify, keep reproducers, summarize.

A program (one module exported one way) ends as one of
- pass: both backends match eager on every call,
- refused: a typed webpte error that names the op it cannot run (errors.py),
- mismatch: an output differs from eager's (count, shape, dtype or values),
- crash: any other exception, or a typed error that names no op.
A module ExecuTorch cannot export one way is "skipped (export)" for that way: not webpte's.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, PteFormatError, UnsupportedOpError, WebpteError
from .compare import ATOL, RTOL, Diff, compare_outputs
from .generate import generate

BACKENDS = ("webgpu", "reference")
STATUSES = ("pass", "refused", "mismatch", "crash")
_OP = re.compile(r"\b(?:aten|et_vk|dim_order_ops|quantized_decomposed|torchao|llama)"
                 r"(?:\.|::)[A-Za-z_0-9]+(?:\.[A-Za-z_0-9]+)?|\bdelegate:\w+")


@dataclass
class Outcome:
    """One backend's run of one program."""

    status: str                      # one of STATUSES
    detail: str = ""                 # the refusal / crash message or the diffs
    trace: str = ""
    reason: str = ""                 # the refusal's or crash's class, numbers elided


@dataclass
class Case:
    """One module exported one way, run on both backends."""

    seed: int
    way: str
    status: str                      # STATUSES or "skipped"
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    reason: str = ""
    reproducer: str | None = None


def classify(e: BaseException) -> Outcome:
    """A refusal when the error is webpte's typed error naming the op, else a crash."""
    msg = f"{type(e).__name__}: {e}"
    ops = sorted(set(getattr(e, "ops", []) or []) | set(_OP.findall(str(e))))
    typed = isinstance(e, WebpteError) and not isinstance(e, (PteFormatError, InputError))
    if typed and (ops or isinstance(e, UnsupportedOpError)):
        return Outcome("refused", msg, reason=f"{type(e).__name__} {_elide(str(e))}")
    what = "typed error naming no op: " if isinstance(e, WebpteError) else ""
    first = str(e).splitlines()[0] if str(e) else ""
    return Outcome("crash", msg, traceback.format_exc(),
                   f"{what}{type(e).__name__} {_elide(first)}")


def _elide(text: str, width: int = 110) -> str:
    text = re.sub(r"\b\d+\b", "N", text)
    text = re.sub(r"\b(pool|state)\d+\b", r"\1N", text)
    text = re.sub(r"'[^']*(?:state|value|buffer|tmp)[^']*'", "'…'", text)
    return text[:width]


def run_backend(data: bytes, backend: str, inputs, expected) -> Outcome:
    from ..program import load

    try:
        prog = load(data, backend=backend)
        diffs: list[Diff] = []
        for call, (args, want) in enumerate(zip(inputs, expected)):
            diffs += compare_outputs(prog.run(*[a.copy() for a in args]), want, call)
    except Exception as e:  # classified: a refusal or a crash
        return classify(e)
    if diffs:
        kinds = "/".join(sorted({d.what for d in diffs}))
        calls = ", ".join(str(c) for c in sorted({d.call for d in diffs}))
        return Outcome("mismatch", "\n".join(map(str, diffs)), reason=f"{kinds} in call {calls}")
    return Outcome("pass")


def run_module(seed: int, ways, out_dir: Path | None) -> list[Case]:
    """Generate program `seed`, run it eagerly, export it each way and run every export."""
    return run_source(generate(seed).source, seed, ways, out_dir)


def run_source(source: str, seed: int, ways, out_dir: Path | None) -> list[Case]:
    """Run a program's source (generated, or a saved reproducer's module.py) all `ways`."""
    from .export import ExportFailed, eager, export, load_module

    try:
        ns = load_module(source, f"<difftest program {seed}>")
        inputs, expected = eager(ns)
    except Exception as e:  # the generator made an invalid module: its bug, kept
        case = Case(seed, "eager", "invalid", reason=f"{type(e).__name__}: {_elide(str(e))}")
        case.outcomes["eager"] = Outcome("crash", str(e), traceback.format_exc())
        if out_dir is not None:
            case.reproducer = save(out_dir, case, source, None, None, None)
        return [case]
    cases = []
    for way in ways:
        try:
            data = export(ns, way)
        except ExportFailed as e:
            cases.append(Case(seed, way, "skipped", reason=_elide(str(e).splitlines()[0])))
            continue
        case = Case(seed, way, "pass")
        for backend in BACKENDS:
            case.outcomes[backend] = run_backend(data, backend, inputs, expected)
        statuses = {o.status for o in case.outcomes.values()}
        case.status = next(s for s in ("crash", "mismatch", "refused", "pass") if s in statuses)
        bad = [o for o in case.outcomes.values() if o.status == case.status]
        case.reason = bad[0].reason
        if case.status in ("crash", "mismatch") and out_dir is not None:
            case.reproducer = save(out_dir, case, source, data, inputs, expected)
        cases.append(case)
    return cases


def save(out_dir: Path, case: Case, source: str, data, inputs, expected) -> str:
    """out/difftest/<seed>-<way>/: module.py, program.pte, inputs.npz (with eager outputs, as
    `webpte run --inputs` reads them), report.txt."""
    d = Path(out_dir) / f"{case.seed}-{case.way}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "module.py").write_text(source)
    lines = [f"seed {case.seed}, way {case.way}: {case.status} ({case.reason})",
             f"rerun: webpte difftest -n 1 --seed {case.seed} --ways {case.way}"]
    if data is not None:
        (d / "program.pte").write_bytes(data)
        arrays = {}
        for i, (args, outs) in enumerate(zip(inputs, expected)):
            arrays |= {f"call{i}_input_{j}": a for j, a in enumerate(args)}
            arrays |= {f"call{i}_output_{j}": o for j, o in enumerate(outs)}
        np.savez(d / "inputs.npz", **arrays)
        lines.append(f"       webpte run {d}/program.pte --inputs {d}/inputs.npz "
                     f"[--backend reference]")
        lines.append(f"tolerance: float32 atol {ATOL:g} + rtol {RTOL:g} * |eager|; "
                     f"ints and bools exact")
    for backend, o in case.outcomes.items():
        lines += ["", f"== {backend}: {o.status}", o.detail, o.trace]
    (d / "report.txt").write_text("\n".join(lines).rstrip() + "\n")
    (d / "seed.json").write_text(json.dumps({"seed": case.seed, "way": case.way,
                                             "status": case.status}) + "\n")
    return str(d)


@dataclass
class Report:
    """Every case of a run and the totals the summary prints."""

    modules: int = 0
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str, way: str | None = None) -> int:
        return sum(1 for c in self.cases
                   if c.status == status and (way is None or c.way == way))

    @property
    def programs(self) -> int:
        return sum(1 for c in self.cases if c.status in (*STATUSES, "invalid"))

    def summary(self) -> str:
        lines = [f"{self.modules} modules in {self.seconds:.0f} s; "
                 f"{self.count('invalid')} invalid (generator), "
                 f"{self.count('skipped')} exports skipped (ExecuTorch failed)"]
        for way in dict.fromkeys(c.way for c in self.cases if c.status != "invalid"):
            per = {s: self.count(s, way) for s in (*STATUSES, "skipped")}
            by_backend = Counter(b for c in self.cases if c.way == way
                                 for b, o in c.outcomes.items() if o.status in ("mismatch",
                                                                                "crash"))
            lines.append(f"  way {way:8s} {sum(per.values()) - per['skipped']:5d} programs: "
                         + ", ".join(f"{per[s]} {s}" for s in STATUSES)
                         + f"; {per['skipped']} skipped (export)"
                         + (f"; failing on {dict(by_backend)}" if by_backend else ""))
        for title, status in (("refused", "refused"), ("skipped (export)", "skipped")):
            reasons = Counter(c.reason for c in self.cases if c.status == status)
            if reasons:
                lines.append(f"{title} by reason:")
                lines += [f"  {n:5d}  {r}" for r, n in reasons.most_common()]
        failures: dict[tuple, list[tuple[Case, str]]] = {}
        for c in self.cases:
            for backend, o in c.outcomes.items():
                if o.status in ("mismatch", "crash"):
                    key = (o.status, re.sub(r"fused:[\w+]+", "fused:…", o.reason))
                    failures.setdefault(key, []).append((c, f"{c.way}/{backend}"))
        if failures:
            lines.append("failures by class (programs, way/backend, one reproducer):")
            for (status, reason), hits in sorted(failures.items(), key=lambda kv: -len(kv[1])):
                programs = list(dict.fromkeys(c.seed for c, _ in hits))
                where = ", ".join(dict.fromkeys(w for _, w in hits))
                lines.append(f"  {len(programs):5d}  {status}: {reason} [{where}] "
                             f"e.g. {hits[0][0].reproducer or hits[0][0].seed}")
        lines.append(f"difftest: {self.programs} programs, {self.count('pass')} pass, "
                     f"{self.count('refused')} refused, {self.count('mismatch')} mismatch, "
                     f"{self.count('crash') + self.count('invalid')} crash")
        return "\n".join(lines)


def run_difftest(n: int, seed: int = 0, start: int = 0, ways=("webgpu", "portable", "alias"),
                 out_dir: str | Path | None = "out/difftest", progress=None) -> Report:
    """Programs seed+start .. seed+start+n-1, each exported `ways`."""
    report = Report()
    t0 = time.perf_counter()
    for i in range(start, start + n):
        cases = run_module(seed + i, ways, None if out_dir is None else Path(out_dir))
        report.modules += 1
        report.cases += cases
        report.seconds = time.perf_counter() - t0
        if progress:
            progress(report, cases)
    return report
