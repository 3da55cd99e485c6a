"""compiled mode's counters in torchtpu.metrics (``compiled()`` reads them)."""
from __future__ import annotations

from .. import _C


def _count(name: str, n: int = 1) -> None:
    _C.metrics_count(name, int(n))


def _count_failure(reason: str) -> None:
    """A graph that is not a program (torchtpu.metrics.compiled()["program_failures"])."""
    _count("compile.program_failures")
    _count(f"compile.program_failure.{reason}")
