"""Comparison helpers shared by the CLI, benchmarks and tests."""

from __future__ import annotations

import numpy as np


def rel_l2(actual, expected) -> float:
    """||actual - expected|| / ||expected|| (absolute when the reference is all zero)."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    denom = np.linalg.norm(e.ravel())
    return float(np.linalg.norm((a - e).ravel()) / (denom if denom > 0 else 1.0))
