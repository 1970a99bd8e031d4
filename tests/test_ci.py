"""The CI entry points cannot pass vacuously: GPU tests fail rather than skip when an adapter
is required and missing, and every Makefile recipe that pipes into `tee` keeps the exit status
of the command before it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_no_adapter_skips_or_fails_as_required(monkeypatch):
    monkeypatch.setattr(conftest, "_REASON", "no WebGPU adapter: (a test's stand-in)")
    monkeypatch.setattr(conftest, "_CHECKED", True)
    monkeypatch.delenv(conftest.REQUIRE_ADAPTER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="stand-in"):
        conftest.require_adapter()
    monkeypatch.setenv(conftest.REQUIRE_ADAPTER, "1")
    with pytest.raises(pytest.fail.Exception, match="stand-in.*WEBPTE_REQUIRE_ADAPTER is set"):
        conftest.require_adapter()
    monkeypatch.setattr(conftest, "_REASON", None)
    conftest.require_adapter()   # an adapter: neither


def test_ci_and_make_test_require_an_adapter():
    assert "export WEBPTE_REQUIRE_ADAPTER=1" in (ROOT / ".ci/run").read_text()
    recipe = re.search(r"^test:.*?\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and "WEBPTE_REQUIRE_ADAPTER=$${WEBPTE_REQUIRE_ADAPTER:-1} $(BIN)/pytest" \
        in recipe.group(1)


def test_every_tee_in_the_makefile_runs_under_pipefail():
    """A recipe's shell command (continuation lines joined) that pipes into tee sets pipefail
    first, so `make conformance` fails when `webpte conformance` does."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    tees = [line for line in text.splitlines() if line.startswith("\t") and "| tee" in line]
    assert tees, "the Makefile has recipes that tee"
    for line in tees:
        assert "set -o pipefail;" in line.split("| tee")[0], line
