"""The fuzz loop and its oracle: every mutant must give a valid result or a typed error
(`WebpteError`). Anything else, a broken invariant (`Finding`) or a mutant running past the
per-mutant time limit is a crash or a hang, reported with a reproducer (seed, mutant index,
mutations, traceback) and saved under `out_dir`.

Mutant `i` of seed `s` is made by `random.Random(f"{s}:{i}")` alone, so any mutant is
rebuilt from its seed and index (`python -m webpte.fuzz --seed S --index I`).
"""

from __future__ import annotations

import random
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WebpteError
from .targets import FolderTarget, GlueTarget, PlanJsonTarget, PteTarget, committed_programs

# Share of the mutants each target gets (the reader and planner take most).
WEIGHTS = {"pte": 0.7, "plan": 0.14, "folder": 0.08, "glue": 0.08}


class _Hang(BaseException):
    """Raised by the alarm in the mutant that ran too long (BaseException: no `except
    Exception` of the code under test swallows it)."""


@dataclass
class Crash:
    seed: int
    index: int
    target: str
    source: str
    steps: list[str]
    error: str
    trace: str
    saved: str | None = None
    mutant: bytes | str = field(default=b"", repr=False)
    targets: str = ",".join(WEIGHTS)

    @property
    def signature(self) -> str:
        """Exception type and the innermost frame: one line per crash class."""
        frames = [ln.strip() for ln in self.trace.splitlines() if ln.strip().startswith("File")]
        return f"{self.error.split(':', 1)[0]} at {frames[-1] if frames else '?'}"

    def reproducer(self) -> str:
        lines = [f"{self.error}  [{self.target}: {self.source}]",
                 f"  reproduce: python -m webpte.fuzz --seed {self.seed} --index {self.index}"
                 + ("" if self.targets == ",".join(WEIGHTS) else f" --targets {self.targets}")]
        lines += [f"  mutation: {s}" for s in self.steps]
        if self.saved:
            lines.append(f"  mutant saved as {self.saved}")
        lines += ["  " + ln for ln in self.trace.rstrip().splitlines()]
        return "\n".join(lines)


@dataclass
class Report:
    seed: int
    mutants: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    crashes: list[Crash] = field(default_factory=list)
    seconds: float = 0.0
    slowest: tuple[float, int] = (0.0, -1)
    typed: dict[str, int] = field(default_factory=dict)   # typed errors by class name

    def count(self, target: str, outcome: str) -> None:
        per = self.counts.setdefault(target, {"valid": 0, "typed": 0, "crash": 0, "hang": 0})
        per[outcome] += 1
        self.mutants += 1

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def summary(self) -> str:
        lines = [f"fuzz seed {self.seed}: {self.mutants} mutants in {self.seconds:.1f} s: "
                 f"{self.total('valid')} valid, {self.total('typed')} typed errors, "
                 f"{self.total('crash')} crashes, {self.total('hang')} hangs "
                 f"(slowest mutant {self.slowest[1]}: {self.slowest[0] * 1e3:.0f} ms)"]
        if self.typed:
            lines.append("  typed errors: " + ", ".join(
                f"{n} {k}" for k, n in sorted(self.typed.items(), key=lambda kv: -kv[1])))
        for name, c in sorted(self.counts.items()):
            lines.append(f"  {name:7s} {sum(c.values()):7d} mutants: {c['valid']} valid, "
                         f"{c['typed']} typed, {c['crash']} crashes, {c['hang']} hangs")
        classes: dict[str, int] = {}
        for c in self.crashes:
            classes[c.signature] = classes.get(c.signature, 0) + 1
        for sig, n in sorted(classes.items(), key=lambda kv: -kv[1]):
            lines.append(f"  crash class x{n}: {sig}")
        return "\n".join(lines)


class Fuzzer:
    """The targets, built once (seeds read, sites walked lazily)."""

    def __init__(self, targets: tuple[str, ...] = tuple(WEIGHTS), fixtures: Path | None = None):
        unknown = set(targets) - set(WEIGHTS)
        if unknown:
            raise ValueError(f"unknown fuzz targets {sorted(unknown)}; known: {list(WEIGHTS)}")
        paths = committed_programs() if fixtures is None else committed_programs(fixtures)
        makers = {"pte": lambda: PteTarget(paths), "plan": lambda: PlanJsonTarget(paths),
                  "folder": FolderTarget, "glue": GlueTarget}
        self.targets = {name: makers[name]() for name in targets}
        self.names = list(self.targets)
        self.weights = [WEIGHTS[n] for n in self.names]
        self.typed_name: str | None = None   # the last mutant's typed error

    def close(self) -> None:
        for t in self.targets.values():
            if hasattr(t, "close"):
                t.close()

    def one(self, seed: int, index: int, time_limit: float):
        """Build and run mutant `index`: (target, outcome, Crash | None, seconds)."""
        rng = random.Random(f"{seed}:{index}")
        name = rng.choices(self.names, self.weights)[0]
        target = self.targets[name]
        mutant, source, steps = target.mutant(rng)
        t0 = time.perf_counter()
        outcome, crash, self.typed_name = "valid", None, None
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit)
        try:
            self.typed_name = target.run(mutant, rng)
            if self.typed_name is not None:
                outcome = "typed"
        except WebpteError as e:
            outcome, self.typed_name = "typed", type(e).__name__
        except _Hang:
            outcome = "hang"
            crash = Crash(seed, index, name, source, steps,
                          f"hang: over {time_limit:g} s", traceback.format_exc())
        except Exception as e:  # the oracle: anything untyped is a crash
            outcome = "crash"
            crash = Crash(seed, index, name, source, steps, f"{type(e).__name__}: {e}"[:300],
                          traceback.format_exc())
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if crash is not None:
            crash.mutant, crash.targets = mutant, ",".join(self.names)
        return name, outcome, crash, time.perf_counter() - t0


def _alarm(signum, frame):
    raise _Hang()


def run_fuzz(n: int, seed: int = 0, *, start: int = 0, targets: tuple[str, ...] = tuple(WEIGHTS),
             time_limit: float = 10.0, out_dir: str | Path | None = "out/fuzz",
             progress=None) -> Report:
    """Run mutants `start .. start+n-1` of `seed`; crashes are saved under `out_dir` (None:
    not saved). `progress(report)` is called every 1,000 mutants."""
    fuzzer = Fuzzer(targets)
    report = Report(seed)
    t0 = time.perf_counter()
    try:
        for index in range(start, start + n):
            name, outcome, crash, seconds = fuzzer.one(seed, index, time_limit)
            report.count(name, outcome)
            if outcome == "typed":
                report.typed[fuzzer.typed_name] = report.typed.get(fuzzer.typed_name, 0) + 1
            if seconds > report.slowest[0]:
                report.slowest = (seconds, index)
            if crash is not None:
                crash.saved = _save(crash, out_dir)
                report.crashes.append(crash)
            if progress is not None and (index - start + 1) % 1000 == 0:
                report.seconds = time.perf_counter() - t0
                progress(report)
    finally:
        fuzzer.close()
    report.seconds = time.perf_counter() - t0
    return report


def _save(crash: Crash, out_dir) -> str | None:
    if out_dir is None:
        return None
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    mutant = crash.mutant
    data = mutant if isinstance(mutant, bytes) else mutant.encode("utf-8", "surrogatepass")
    ext = "pte" if crash.target == "pte" else "json"
    path = folder / f"{crash.target}-{crash.seed}-{crash.index}.{ext}"
    path.write_bytes(data)
    (folder / f"{path.name}.txt").write_text(crash.reproducer() + "\n")
    return str(path)
