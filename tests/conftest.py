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
# Set (to anything but 0) where an adapter must exist (CI, `make test`: lavapipe).
REQUIRE_ADAPTER = "WEBPTE_REQUIRE_ADAPTER"


def require_adapter() -> None:
    """Skip the calling test (with the reason) when no WebGPU adapter exists; fail it when
    $WEBPTE_REQUIRE_ADAPTER is set, so a run that needs the GPU tests cannot skip them all."""
    global _REASON, _CHECKED
    if not _CHECKED:
        _REASON, _CHECKED = _has_adapter(), True
    if not _REASON:
        return
    if os.environ.get(REQUIRE_ADAPTER, "") not in ("", "0"):
        pytest.fail(f"{_REASON} ({REQUIRE_ADAPTER} is set: this run needs an adapter; "
                    f"`make setup` installs lavapipe)", pytrace=False)
    pytest.skip(_REASON)


@pytest.fixture
def gpu():
    """Skip (with the reason) when no WebGPU adapter exists; fail under
    $WEBPTE_REQUIRE_ADAPTER."""
    require_adapter()


@pytest.fixture
def rng(request):
    import zlib

    import numpy as np
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
