"""numpy for the numpy references, or None where it is absent (Pyodide in the page).

Lowering code never touches numpy, so planning runs without it.
"""

try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised by the no-numpy planning test
    np = None

__all__ = ["np"]
