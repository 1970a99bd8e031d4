"""Run a generated ExecuTorch WebGPU op-test catalog and report per op.

A catalog is what `tools/gen_op_catalog.py` (ExecuTorch's own generator, case by case)
writes: per case a `.pte`, raw little-endian inputs and goldens, and `manifest.json` with
one entry per checked output:
`{op, case, pte, inputs: [{path, shape, dtype}], golden: {path, shape, dtype,
output_index}, atol, rtol, required, heavy}`. The GPU's outputs are poisoned before the
run (`load(poison=True)`): an element no kernel writes is the poison NaN, which matches
nothing, or a bool word that fails the read. An output's shape must equal the golden's
exactly; then goldens of dtype bool / int8 / int64 are compared exactly, float32 goldens
with torch's rule `|actual - golden| <= atol + rtol * |golden|` (a computed NaN matches NaN,
infinities must be equal).

`webpte conformance DIR` prints a table per op and a summary line; the browser suite runs
the same manifest in the page with the same comparison (tests/browser/catalog.test.mjs).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError, UnsupportedOpError, WebpteError
from .native.executor import POISON_WORD

# Manifest dtype -> how its raw bytes are stored.
_RAW = {"float32": "<f4", "int32": "<i4", "int64": "<i8", "int8": "<i1", "bool": "<i1"}
STATUSES = ("pass", "mismatch", "unsupported", "error", "crash")


class CatalogError(WebpteError):
    """A catalog folder or manifest entry that cannot be read as the generator writes it."""


@dataclass
class CaseResult:
    op: str
    case: str
    pte: str
    status: str                       # one of STATUSES
    detail: str = ""
    max_abs_err: float | None = None
    mismatches: int = 0
    first_mismatches: list = field(default_factory=list)   # [(index, golden, actual)]
    unsupported_ops: list = field(default_factory=list)
    seconds: float = 0.0


def load_manifest(folder: Path) -> list[dict]:
    """The manifest's entries, each checked for the fields the runner reads."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise CatalogError(f"{folder} has no manifest.json; generate a catalog with "
                           f"`python tools/gen_op_catalog.py --output {folder}`")
    try:
        entries = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path} is not JSON: {e}") from None
    if not isinstance(entries, list):
        raise CatalogError(f"{path} must hold a list of entries")
    for i, e in enumerate(entries):
        try:
            ok = (isinstance(e["op"], str) and isinstance(e["pte"], str)
                  and isinstance(e["inputs"], list) and isinstance(e["golden"], dict)
                  and e["golden"]["dtype"] in _RAW
                  and all(x["dtype"] in _RAW for x in e["inputs"]))
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise CatalogError(f"{path}: entry {i} is not a catalog entry "
                               f"(op, case, pte, inputs, golden with known dtypes)")
    return entries


def _inside(folder: Path, rel: str) -> Path:
    p = (folder / rel).resolve()
    if folder.resolve() not in p.parents:
        raise CatalogError(f"manifest path {rel!r} leaves the catalog folder")
    return p


def read_raw(folder: Path, spec: dict) -> np.ndarray:
    """One input or golden file as the array the manifest describes."""
    shape = tuple(int(d) for d in spec["shape"])
    path = _inside(folder, spec["path"])
    if not path.is_file():
        raise CatalogError(f"missing catalog file {spec['path']}")
    raw = np.fromfile(path, dtype=_RAW[spec["dtype"]])
    if raw.size != math.prod(shape):
        raise CatalogError(f"{spec['path']} holds {raw.size} elements, manifest says "
                           f"{list(shape)}")
    arr = raw.reshape(shape)
    return arr.astype(bool) if spec["dtype"] == "bool" else arr


def compare(actual: np.ndarray, golden: np.ndarray, golden_dtype: str, atol: float,
            rtol: float) -> tuple[np.ndarray, float | None]:
    """(mask of mismatching elements, max abs error for float goldens). A float32 element
    holding the poison word was never written and mismatches even a NaN golden."""
    if golden_dtype in ("bool", "int8", "int64"):
        a = np.asarray(actual)
        a = a.astype(np.int64) if a.dtype.kind in "biu" else a.astype(np.float64)
        return a != golden.astype(np.int64), None
    a = np.asarray(actual, np.float64)
    g = golden.astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(a - g)
        close = err <= atol + rtol * np.abs(g)
    raw = np.asarray(actual)
    unwritten = (raw.view(np.uint32) == POISON_WORD if raw.dtype == np.float32
                 else np.zeros(raw.shape, bool))
    both_nan = np.isnan(a) & np.isnan(g) & ~unwritten
    same_inf = np.isinf(g) & (a == g)
    bad = ~(close | both_nan | same_inf)
    finite = np.isfinite(err)
    return bad, float(err[finite].max()) if finite.any() else None


class _Loaded:
    """Programs loaded once per .pte (multi-output ops have one entry per output)."""

    def __init__(self, folder: Path, backend: str):
        self.folder, self.backend = folder, backend
        self.key: str | None = None
        self.outputs: list | Exception | None = None

    def outputs_for(self, entry: dict):
        if entry["pte"] != self.key:
            from .program import load

            self.key = entry["pte"]
            try:
                prog = load(_inside(self.folder, entry["pte"]), backend=self.backend,
                            poison=True)
                arrays = [read_raw(self.folder, x) for x in entry["inputs"]]
                self.outputs = prog.run(*arrays)
            except Exception as e:  # kept per case, reported by its class
                self.outputs = e
        if isinstance(self.outputs, Exception):
            raise self.outputs
        return self.outputs


def run_entry(folder: Path, entry: dict, loaded: _Loaded) -> CaseResult:
    r = CaseResult(entry["op"], str(entry.get("case")), entry["pte"], "pass")
    t0 = time.perf_counter()
    try:
        golden = read_raw(folder, entry["golden"])
        outs = loaded.outputs_for(entry)
        idx = int(entry["golden"].get("output_index", 0))
        if not 0 <= idx < len(outs):
            raise InputError(f"the program has {len(outs)} outputs, the golden is output {idx}")
        actual = np.asarray(outs[idx])
        if actual.shape != golden.shape:
            r.status = "mismatch"
            r.detail = f"shape {list(actual.shape)} != golden {list(golden.shape)}"
        else:
            bad, r.max_abs_err = compare(actual, golden, entry["golden"]["dtype"],
                                         float(entry.get("atol", 1e-3)),
                                         float(entry.get("rtol", 1e-3)))
            if bad.any():
                r.status = "mismatch"
                r.mismatches = int(bad.sum())
                r.first_mismatches = [
                    (tuple(int(v) for v in i), golden[tuple(i)].item(), actual[tuple(i)].item())
                    for i in np.argwhere(bad)[:4]]
                r.detail = f"{r.mismatches} of {bad.size} elements outside tolerance"
    except UnsupportedOpError as e:
        r.status, r.detail, r.unsupported_ops = "unsupported", str(e), list(e.ops)
    except WebpteError as e:
        r.status, r.detail = "error", f"{type(e).__name__}: {e}"
    except Exception as e:  # a bug in webpte: reported, the run goes on
        r.status, r.detail = "crash", f"{type(e).__name__}: {e}"
    r.seconds = time.perf_counter() - t0
    return r


def run_catalog(folder, *, backend: str = "webgpu", ops=None, progress=None) -> list[CaseResult]:
    """Run every entry of the catalog in `folder` (optionally only `ops`, each of which it
    must hold)."""
    folder = Path(folder)
    entries = load_manifest(folder)
    if ops:
        wanted = set(ops)
        if unknown := sorted(wanted - {e["op"] for e in entries}):
            raise CatalogError(f"{folder} holds no case of {', '.join(unknown)}; its ops are "
                               f"in manifest.json")
        entries = [e for e in entries if e["op"] in wanted]
    loaded = _Loaded(folder, backend)
    results = []
    for i, entry in enumerate(sorted(entries, key=lambda e: e["pte"])):
        results.append(run_entry(folder, entry, loaded))
        if progress:
            progress(i + 1, len(entries), results[-1])
    return results


def summarize(results: list[CaseResult]) -> dict:
    """Per op: case counts by status; plus totals."""
    per_op: dict[str, dict] = {}
    for r in results:
        row = per_op.setdefault(r.op, {s: 0 for s in STATUSES})
        row[r.status] += 1
    ops_passing = sum(1 for row in per_op.values() if row["pass"] == sum(row.values()))
    totals = {s: sum(1 for r in results if r.status == s) for s in STATUSES}
    return {"ops": len(per_op), "ops_passing": ops_passing, "cases": len(results),
            **totals, "per_op": dict(sorted(per_op.items()))}


def format_table(results: list[CaseResult]) -> str:
    """The per-op table and the summary line `webpte conformance` prints."""
    s = summarize(results)
    by_op: dict[str, list[CaseResult]] = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    lines = [f"{'op':34} {'cases':>5} {'pass':>5}  failing"]
    for op, rs in sorted(by_op.items()):
        bad = [r for r in rs if r.status != "pass"]
        note = ""
        if bad:
            r = bad[0]
            what = {"unsupported": f"unsupported {', '.join(r.unsupported_ops) or ''}".strip(),
                    "mismatch": f"mismatch {r.detail}"
                    + (f" first {r.first_mismatches[:2]}" if r.first_mismatches else ""),
                    "error": r.detail, "crash": f"CRASH {r.detail}"}[r.status]
            note = f"{r.case}: {what}"[:160]
            if len(bad) > 1:
                note += f" (+{len(bad) - 1} more)"
        lines.append(f"{op:34} {len(rs):5d} {len(rs) - len(bad):5d}  {note}")
    lines.append(f"summary: {s['ops_passing']}/{s['ops']} ops and {s['pass']}/{s['cases']} "
                 f"cases pass; {s['mismatch']} mismatch, {s['unsupported']} unsupported, "
                 f"{s['error']} typed error, {s['crash']} crash")
    return "\n".join(lines)


def results_json(results: list[CaseResult]) -> dict:
    return {"summary": summarize(results), "cases": [asdict(r) for r in results]}
