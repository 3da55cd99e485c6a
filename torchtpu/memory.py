"""``torch.tpu.memory``: the simulated HBM allocator's state, in the formats of ``torch.cuda.memory``
(docs/insight.md, "Memory tools").

- ``memory_summary(device=None, abbreviated=False)``: a table of the allocator's statistics;
- ``memory_snapshot()``: the allocator's segments (each block of this allocator is a segment);
- ``_record_memory_history(enabled="all", ..., max_entries=...)``: record every allocation and
  free with the Python stack that made it;
- ``_snapshot()`` / ``_dump_snapshot(filename)``: the segments and the recorded trace, in the
  dictionary ``torch.cuda.memory._snapshot()`` returns, so PyTorch's memory visualizer
  (pytorch.org/memory_viz, or ``python -m torch.cuda._memory_viz trace_plot snapshot.pickle``)
  reads it.
"""
from __future__ import annotations

import pickle
import sys
from typing import Any

import torch

from . import _C


def _device_index(device: Any) -> int:
    if device is None:
        return torch.tpu.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return d.index if d.index is not None else torch.tpu.current_device()


def _record_memory_history(enabled: str | None = "all", context: str | None = "all",
                           stacks: str = "python", max_entries: int = sys.maxsize,
                           device: Any = None, **kwargs: Any) -> None:
    """Starts (``enabled="all"`` or ``"state"``) or stops (``enabled=None``) recording the
    allocator's history: each allocation and free, with the Python stack that made it (stacks
    of C++ frames are not gathered: ``stacks="python"`` is what is recorded). Applies to every
    device, as in CUDA's allocator."""
    if enabled not in (None, False, "all", "state"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    on = enabled not in (None, False)
    _C.record_memory_history(on, int(max_entries) if enabled == "all" else 0)


def _snapshot(device: Any = None) -> dict:
    """The allocator's segments and recorded trace, as ``torch.cuda.memory._snapshot()``."""
    return _C.memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` to `filename` (the file the memory visualizer opens)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot() -> list[dict]:
    """The allocator's segments across all devices (``torch.cuda.memory_snapshot()``)."""
    return _snapshot()["segments"]


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's statistics for one device (as
    ``torch.cuda.memory_summary``): current, peak, allocated and freed figures for allocated,
    active, requested and reserved memory, allocations and segments, per pool."""
    index = _device_index(device)
    stats = torch.tpu.memory_stats(index)
    free, total = torch.tpu.mem_get_info(index)
    chip = _C.chip()["name"]
    width = 79
    lines = ["=" * width,
             f" TPU memory summary, device {index} (simulated {chip} HBM: "
             f"{_format_bytes(total)}, {_format_bytes(free)} free)".ljust(width),
             "-" * width,
             f" OOMs: {stats.get('num_ooms', 0):<12} alloc retries: "
             f"{stats.get('num_alloc_retries', 0):<12} device allocs/frees: "
             f"{stats.get('num_device_alloc', 0)}/{stats.get('num_device_free', 0)}",
             "=" * width,
             f" {'Metric':<24}{'Cur Usage':>13}{'Peak Usage':>13}{'Tot Alloc':>14}{'Tot Freed':>14}",
             "-" * width]
    rows = [("allocated_bytes", "Allocated memory", True),
            ("active_bytes", "Active memory", True),
            ("requested_bytes", "Requested memory", True),
            ("reserved_bytes", "Reserved memory", True),
            ("allocation", "Allocations", False),
            ("active", "Active allocs", False),
            ("segment", "Segments (blocks)", False)]
    pools = [("all", "")] if abbreviated else [("all", ""), ("large_pool", "  from large pool"),
                                               ("small_pool", "  from small pool")]
    for key, title, is_bytes in rows:
        for pool, label in pools:
            fmt = _format_bytes if is_bytes else str
            vals = [stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated",
                                                                  "freed")]
            name = title if pool == "all" else label
            lines.append(f" {name:<24}" + "".join(f"{fmt(v):>13}" if i < 2 else f"{fmt(v):>14}"
                                                   for i, v in enumerate(vals)))
        lines.append("-" * width)
    lines.append("=" * width)
    return "\n".join(lines) + "\n"
