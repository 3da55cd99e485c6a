"""Counters of everything the device did, in the spirit of PyTorch/XLA's metrics report.

- ``native_ops()``: aten ops run by a native torchtpu kernel, by name;
- ``fallbacks()``: aten ops that ran on the CPU through the fallback, by name;
- ``counters()``: other events (bytes transferred per direction, out-of-memory errors, ...);
- ``report()``: all of it, with the memory figures of each device, as text;
- ``reset()``: zero every counter.
"""
from __future__ import annotations

import torch

from . import _C


def native_ops() -> dict[str, int]:
    return dict(_C.metrics_snapshot("op"))


def fallbacks() -> dict[str, int]:
    return dict(_C.metrics_snapshot("fallback"))


def counters() -> dict[str, int]:
    return dict(_C.metrics_snapshot("counter"))


def reset() -> None:
    _C.metrics_reset()


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _table(title: str, rows: dict[str, int], limit: int | None = None) -> list[str]:
    lines = [f"{title}: {sum(rows.values())} in {len(rows)} kinds"]
    ranked = sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))
    for name, count in ranked[:limit]:
        lines.append(f"  {count:>10}  {name}")
    if limit is not None and len(ranked) > limit:
        lines.append(f"  ... {len(ranked) - limit} more")
    return lines


def report(limit: int | None = 20) -> str:
    """A text report of the counters and of each device's simulated HBM."""
    chip = _C.chip()
    lines = [
        f"torchtpu metrics (simulated TPU {chip['name']}, {_C.device_count()} device(s), "
        f"HBM {_bytes(_C.hbm_capacity_bytes())} each)",
    ]
    lines += _table("native ops", native_ops(), limit)
    lines += _table("CPU fallbacks", fallbacks(), limit)
    other = counters()
    lines.append("counters:")
    for name in sorted(other):
        value = other[name]
        lines.append(f"  {name}: {_bytes(value) if name.endswith('_bytes') else value}")
    lines.append("memory (measured in the simulated HBM allocator):")
    for idx in range(_C.device_count()):
        dev = torch.device("tpu", idx)
        peak = torch.accelerator.max_memory_allocated(dev)
        if peak == 0 and torch.accelerator.memory_reserved(dev) == 0:
            continue
        lines.append(
            f"  tpu:{idx}: allocated {_bytes(torch.accelerator.memory_allocated(dev))}, "
            f"peak {_bytes(peak)}, reserved {_bytes(torch.accelerator.memory_reserved(dev))}"
        )
    return "\n".join(lines)
