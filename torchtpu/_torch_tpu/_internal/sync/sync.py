"""Materialization of deferred tensors under TorchTPU's names, over torchtpu's fused eager
(docs/eager-modes.md)."""
from __future__ import annotations

from typing import Iterable

import torch

import torchtpu
from torchtpu import _C

__all__ = ["is_materialized", "is_materializing", "synchronize"]


def _device_tensors(tensors) -> list[torch.Tensor]:
    if tensors is None:
        return []
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    found = []
    for t in tensors:
        t = getattr(t, "_local_tensor", t)  # a DTensor's shard
        t = getattr(t, "elem", t)  # a wrapper subclass's tensor
        if isinstance(t, torch.Tensor) and t.device.type == "tpu":
            found.append(t)
    return found


def synchronize(tensors: torch.Tensor | Iterable[torch.Tensor] | None = None,
                wait: bool = False) -> None:
    """Computes the deferred tensors (``None``: all of them) and returns when their values are
    there. torchtpu runs every recorded op of the process here, whether or not ``tensors`` need
    it, and waits whatever ``wait`` says: it computes no less than asked and returns no earlier
    than asked (tensors of other devices are ignored, as by TorchTPU)."""
    _device_tensors(tensors)  # (the arguments are checked as TorchTPU checks them)
    torchtpu.sync()


def _check(t: torch.Tensor) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.device.type != "tpu":
        raise ValueError(f"tensor is not on the tpu device: {type(t).__name__} on "
                         f"{getattr(t, 'device', None)}")
    return t


def is_materialized(t: torch.Tensor) -> bool:
    """False while fused eager has recorded the work that writes the tensor and not run it (its
    storage has no memory yet); True otherwise, in every mode."""
    return not _C.defer_is_pending(_check(t))


def is_materializing(t: torch.Tensor) -> bool:
    """True when the tensor has memory and work is still queued on its device's current stream
    (it may be computing the tensor)."""
    if not is_materialized(t):
        return False
    return not torch.tpu.current_stream(t.device).query()
