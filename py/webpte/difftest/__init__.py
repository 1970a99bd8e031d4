"""Differential testing with generated programs (NNSmith's idea): seeded, valid PyTorch
modules built from the ops webpte supports, exported by ExecuTorch several ways, run by
webpte natively and on its numpy interpreter, and compared with eager PyTorch. Every
mismatch or crash is kept as a reproducer under out/difftest/<seed>-<way>/.

`make difftest` / `webpte difftest -n N --seed S`. Generation needs only Python; running
needs torch and executorch (the export extra), imported lazily.
"""

from .compare import ATOL, RTOL, Diff, compare_outputs
from .generate import ProgramSource, generate
from .runner import Case, Report, run_difftest

__all__ = ["ATOL", "RTOL", "Case", "Diff", "ProgramSource", "Report", "compare_outputs",
           "generate", "run_difftest"]
