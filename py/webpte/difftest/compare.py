"""The comparison of a program's outputs with eager PyTorch's: count, then shape, then dtype,
then values (float32 within `atol + rtol * |expected|`, NaN matching NaN and infinities
equal; integers and bools exactly). Needs numpy only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ATOL = 1e-4
RTOL = 1e-4


@dataclass
class Diff:
    """One way an output differs from eager's."""

    call: int
    output: int | None   # None: the output count differs
    what: str            # count | shape | dtype | values
    detail: str

    def __str__(self) -> str:
        where = f"call {self.call}" + (f" output {self.output}" if self.output is not None
                                       else "")
        return f"{where}: {self.what}: {self.detail}"


def compare_outputs(actual, expected, call: int = 0, atol: float = ATOL,
                    rtol: float = RTOL) -> list[Diff]:
    """Every difference of `actual` (the program's outputs) from `expected` (eager's)."""
    if len(actual) != len(expected):
        return [Diff(call, None, "count", f"{len(actual)} outputs, eager has {len(expected)}")]
    diffs = []
    for j, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            diffs.append(Diff(call, j, "shape", f"{list(a.shape)}, eager {list(e.shape)}"))
        elif a.dtype != e.dtype:
            diffs.append(Diff(call, j, "dtype", f"{a.dtype}, eager {e.dtype}"))
        else:
            d = _values(a, e, atol, rtol)
            if d:
                diffs.append(Diff(call, j, "values", d))
    return diffs


def _values(a: np.ndarray, e: np.ndarray, atol: float, rtol: float) -> str:
    """'' when the values match, else how many differ, the largest error and the first
    mismatching indices with eager's and the program's values."""
    if e.dtype.kind == "f":
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore"):
            err = np.abs(a64 - e64)
            close = err <= atol + rtol * np.abs(e64)
        bad = ~(close | (np.isnan(a64) & np.isnan(e64)) | (np.isinf(e64) & (a64 == e64)))
        finite = err[np.isfinite(err)]
        worst = f", max abs error {finite.max():.3g}" if finite.size else ""
    else:
        bad = a.astype(np.int64) != e.astype(np.int64)
        worst = ""
    if not bad.any():
        return ""
    bad = np.atleast_1d(bad)
    a1, e1 = np.atleast_1d(a), np.atleast_1d(e)
    first = ", ".join(f"{tuple(int(i) for i in idx)}: eager {e1[tuple(idx)].item()!r} "
                      f"got {a1[tuple(idx)].item()!r}" for idx in np.argwhere(bad)[:4])
    return f"{int(bad.sum())} of {bad.size} elements differ{worst}; first {first}"
