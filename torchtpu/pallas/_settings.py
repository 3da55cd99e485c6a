"""Pallas TPU interpret mode's checks for kernels run through torchtpu.pallas (no JAX import here:
``import torchtpu`` never imports JAX). docs/custom-kernels.md, "Debugging a kernel"."""
from __future__ import annotations

import contextlib
import threading

from .. import config

_state = threading.local()
_DEFAULTS = {
    # Interpret mode's race detector (vector clocks over every buffer access and DMA).
    "detect_races": config.flag("TORCHTPU_PALLAS_DETECT_RACES"),
    # "raise": an out-of-bounds read is an error; "uninitialized": it reads garbage, as a TPU.
    "out_of_bounds_reads": config.value("TORCHTPU_PALLAS_OOB_READS"),
    # What never-written memory reads as: "nan" (shows up in results) or "zero".
    "uninitialized_memory": config.value("TORCHTPU_PALLAS_UNINITIALIZED"),
    # TensorCores a grid's "parallel" dimensions are split over (2: a megacore's two).
    "num_cores_or_threads": int(config.value("TORCHTPU_PALLAS_CORES")),
}


def current() -> dict:
    return dict(getattr(_state, "options", None) or _DEFAULTS)


@contextlib.contextmanager
def interpret_checks(**options):
    """Runs the kernels called inside with these interpret-mode options (``detect_races``,
    ``out_of_bounds_reads``, ``uninitialized_memory``, ``num_cores_or_threads``)."""
    unknown = set(options) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"interpret_checks: unknown option(s) {sorted(unknown)}; known: "
                        f"{sorted(_DEFAULTS)}")
    previous = getattr(_state, "options", None)
    _state.options = {**current(), **options}
    try:
        yield
    finally:
        _state.options = previous


def interpret_params(pltpu):
    return pltpu.InterpretParams(**current())
