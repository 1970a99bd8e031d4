import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
sys.path.insert(0, str(Path(__file__).parent))

FIXTURES = Path(__file__).parent / "fixtures"


def _has_adapter() -> str | None:
    try:
        from webpte.native import get_device
        get_device()
        return None
    except Exception as e:  # no wgpu, no driver, no adapter
        return f"no WebGPU adapter: {e}"


_REASON = None
_CHECKED = False


@pytest.fixture
def gpu():
    """Skip (with the reason) when no WebGPU adapter exists."""
    global _REASON, _CHECKED
    if not _CHECKED:
        _REASON, _CHECKED = _has_adapter(), True
    if _REASON:
        pytest.skip(_REASON)


@pytest.fixture
def rng(request):
    import zlib

    import numpy as np
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
