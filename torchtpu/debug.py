"""Seeing what fused eager (DeferAndFuse) does: the regions it plans, and its pending work.

``dump_regions(path)`` appends the IR of every newly planned region to ``path`` (the same as
``TORCHTPU_DUMP_REGIONS=path``); ``dump_regions(None)`` stops. ``cached_regions()`` returns the
IR of every plan in the cache. ``record_locations(True)`` (``TORCHTPU_DEFER_LOCATIONS=1``)
records the Python location of every recorded op, which errors inside fused regions then name.
"""
from __future__ import annotations

from . import _C


def dump_regions(path: str | None) -> None:
    _C.defer_set_dump_path(path or "")


def cached_regions() -> str:
    return _C.defer_cached_plans()


def clear_region_cache() -> None:
    _C.defer_clear_cache()


def pending_ops() -> int:
    """Ops recorded by fused eager and not yet run."""
    return _C.defer_pending_ops()


def record_locations(on: bool) -> None:
    _C.defer_set_record_locations(on)


def set_max_pending_ops(n: int) -> None:
    """Flush the pending graph when it reaches n ops (TORCHTPU_DEFER_MAX_OPS, default 4096)."""
    _C.defer_set_max_pending_ops(n)


def detect_repeated_ops(mode: str | None = None) -> str:
    """Loop detection in fused eager: the pending graph is flushed where the recorded ops repeat a
    sequence of 11 to 128 ops, so each iteration of a loop that reads nothing replays one plan
    (docs/eager-modes.md, "Loops that read nothing"). ``mode``: "safe" or "aggressive" (both
    detect; Google TorchTPU's names and its default, ``TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS``),
    or "off"; None only returns the current mode. Returns the mode in force before the call."""
    previous = _C.defer_repeated_ops()
    if mode is not None:
        if mode not in ("off", "safe", "aggressive", ""):
            raise ValueError(f"detect_repeated_ops: mode must be 'safe', 'aggressive' or 'off', "
                             f"got {mode!r}")
        _C.defer_set_repeated_ops(mode or "off")
    return previous
