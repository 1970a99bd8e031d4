"""Which cases of a generated op catalog CI runs: per op the smallest case, the largest whose
files fit a size limit, and every case that plans a kernel variant no case chosen before it
plans (`tools/gen_op_catalog.py --subset variants`; no torch needed).

A case's variants are the kernels webpte plans for its program under each of
VARIANT_TARGETS' features (the adapter hints decide the kernels: lavapipe's serial attention,
a GPU's tiled and split ones), each told apart by its template and its WGSL with the numbers
taken out: a template branch (a mask, a split over the keys, a row held in registers) makes
another variant, another size of the same code does not. Workgroup sizes are kept.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGE = frozenset({"packed_4x8_integer_dot_product", "subgroups", "subgroups:implicit"})
# name -> (adapter type, device name): the CI adapter natively (lavapipe), the page's
# (SwiftShader) and a GPU's; plan.hints gives each its kernel variants.
VARIANT_TARGETS = {"lavapipe": ("CPU", "llvmpipe"), "swiftshader": ("CPU", "SwiftShader"),
                   "gpu": ("DiscreteGPU", "")}
MAX_CASE_BYTES = 1 << 20   # one case's files (program, inputs, goldens) in the committed subset

_NUMBER = re.compile(r"\b(0x[0-9a-fA-F]+|\d+(\.\d*)?([eE][-+]?\d+)?)[uif]?\b")
_WORKGROUP = re.compile(r"@workgroup_size\([^)]*\)")


def wgsl_shape(wgsl: str) -> str:
    """A digest of `wgsl` with every number but the workgroup size taken out."""
    parts, pos = [], 0
    for m in _WORKGROUP.finditer(wgsl):
        parts += [_NUMBER.sub("#", wgsl[pos:m.start()]), m.group()]
        pos = m.end()
    parts.append(_NUMBER.sub("#", wgsl[pos:]))
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:12]


def target_features() -> dict[str, frozenset[str]]:
    from webpte.planner.hints import adapter_hints

    return {name: adapter_hints(kind, device) | LANGUAGE
            for name, (kind, device) in VARIANT_TARGETS.items()}


@dataclass
class CatalogCase:
    """One program of a catalog and its manifest entries (one per output)."""

    op: str
    name: str
    pte: str
    entries: list[dict]
    numel: int           # input elements, as `--subset smallest` counts
    nbytes: int          # the program, inputs and goldens
    variants: frozenset = field(default_factory=frozenset)

    @property
    def files(self) -> list[str]:
        e = self.entries
        return [self.pte] + [x["path"] for x in e[0]["inputs"]] + [x["golden"]["path"] for x in e]


def read_cases(folder: Path, entries: list[dict] | None = None) -> list[CatalogCase]:
    """The programs of the catalog's manifest (or of `entries` in `folder`), in order."""
    if entries is None:
        entries = json.loads((folder / "manifest.json").read_text())
    cases: dict[str, CatalogCase] = {}
    for e in entries:
        if e["pte"] in cases:
            cases[e["pte"]].entries.append(e)
            continue
        numel = sum(math.prod(x["shape"]) for x in e["inputs"])
        cases[e["pte"]] = CatalogCase(e["op"], str(e["case"]), e["pte"], [e], numel, 0)
    for c in cases.values():
        c.nbytes = sum((folder / f).stat().st_size for f in c.files)
    return list(cases.values())


def case_variants(folder: Path, case: CatalogCase, targets=None) -> frozenset:
    """(target, template, WGSL digest) of every kernel webpte plans for the case's program."""
    from webpte.program import plan_method
    from webpte.pte import read_program

    prog = read_program((folder / case.pte).read_bytes())
    dynamic = any(io.dynamic for io in prog.method("forward").inputs)
    shapes = [tuple(x["shape"]) for x in case.entries[0]["inputs"]] if dynamic else None
    out = set()
    for name, features in (targets or target_features()).items():
        plan = plan_method(prog, "forward", features, input_shapes=shapes)
        out |= {(name, k.name.rsplit("_", 1)[0], wgsl_shape(k.wgsl)) for k in plan.kernels}
    return frozenset(out)


@dataclass
class Choice:
    """One op's chosen cases (with why) and the variants only too-large cases plan."""

    chosen: list[tuple[CatalogCase, str]]
    too_large: list[tuple[CatalogCase, frozenset]]


def choose(cases: list[CatalogCase], max_bytes: int = MAX_CASE_BYTES) -> Choice:
    """One op's cases (variants known): smallest, largest within `max_bytes`, then each
    case, smallest first, that plans a variant none chosen so far plans."""
    smallest = min(cases, key=lambda c: c.numel)
    fitting = [c for c in cases if c.nbytes <= max_bytes] or [smallest]
    largest = max(fitting, key=lambda c: c.numel)
    chosen = [(smallest, "smallest")] + ([(largest, "largest")] if largest is not smallest else [])
    covered = set().union(*(c.variants for c, _ in chosen))
    too_large = []
    for c in sorted(cases, key=lambda c: (c.numel, c.nbytes)):
        new = c.variants - covered
        if not new or any(c is k for k, _ in chosen):
            continue
        if c.nbytes > max_bytes:
            too_large.append((c, frozenset(new)))
            continue
        chosen.append((c, "variant"))
        covered |= c.variants
    too_large = [(c, new - covered) for c, new in too_large if new - covered]
    return Choice(chosen, too_large)


def copy_cases(src: Path, out: Path, cases: list[CatalogCase]) -> list[dict]:
    """Copy the cases' files from `src` to `out`; their manifest entries."""
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for c in cases:
        for f in c.files:
            shutil.copyfile(src / f, out / f)
        entries += c.entries
    return entries
