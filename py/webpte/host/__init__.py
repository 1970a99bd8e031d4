"""The host contract: windows, attention sink, prompt, embeddings, image, sampling, sessions.

Pure Python where it can be (windows, sampling, templates) so it also runs in Pyodide.
"""

from .files import ModelFiles, ModelFolderError, resolve_model_folder
from .prompt import ChatFormat, Turn
from .sampling import Sampler, SamplingOptions
from .windows import ContextFullError, extend_starts, window_starts

__all__ = ["ChatFormat", "ContextFullError", "ModelFiles", "ModelFolderError", "Sampler",
           "SamplingOptions", "Turn", "extend_starts", "load_model", "resolve_model_folder",
           "window_starts"]


def load_model(folder, *, verify: bool = True, backend: str = "webgpu", limits=None):
    """Validate and load a model folder (see webpte.host.files for the layouts) on the GPU,
    or with `backend="reference"` on webpte's numpy interpreter; `limits` as
    `webpte.load`'s ("default", or a dict of caps)."""
    from .model import load_model as _load

    return _load(folder, verify=verify, backend=backend, limits=limits)
