"""webpte: run ExecuTorch WebGPU `.pte` programs natively (wgpu-py) and in the page (Pyodide)."""

from .errors import (
                     AdapterError,
                     ExternalDataError,
                     InputError,
                     PlanError,
                     PteFormatError,
                     UnsupportedOpError,
                     WebpteError,
)
from .program import Program, inspect, load

__version__ = "0.1.0"

__all__ = ["AdapterError", "ExternalDataError", "InputError", "PlanError", "PteFormatError",
           "Program", "UnsupportedOpError", "WebpteError", "__version__", "inspect", "load"]
