"""Seeded, structure-aware fuzzing of what webpte reads from strangers: `.pte` programs
(reader and planner), plans given as JSON, model folders and the worker protocol's
Python side. Every mutant must end in a valid result or a typed error.

`make fuzz` / `webpte fuzz -n N --seed S` / `python -m webpte.fuzz`.
"""

from .runner import Crash, Fuzzer, Report, run_fuzz

__all__ = ["Crash", "Fuzzer", "Report", "run_fuzz"]
