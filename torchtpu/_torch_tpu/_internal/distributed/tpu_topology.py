"""``get_tpu_topology(world_size=None)``: the slice topology and chip count of this host's
simulated chips, as TorchTPU's launchers read them from the host's PCI devices.

The count is torch.tpu.device_count() (``ACCELERATOR_TYPE``, ``TPU_VISIBLE_DEVICES``,
``TORCHTPU_NUM_DEVICES``); the topology is chips per torus axis, TorchTPU's "2,2,1" form, the
form ``TORCH_TPU_TOPOLOGY`` takes (torchtpu prices collectives on it: csrc/sim/CostModel.cpp)."""
from __future__ import annotations

import logging

import torch

__all__ = ["get_tpu_topology"]

# Chips per torus axis of a single host's slice, by generation and chip count: Google Cloud's
# single-host shapes (its TPU documentation's topology tables). Where TorchTPU's own table differs
# (it gives 8 chips of v5e and v6e as "2,2,2"), this one keeps the physical 2-D shape, which the
# cost model prices. A single chip is "1,1,1" (TorchTPU raises for one chip).
_HOST_SHAPES = {
    "v4": {1: "1,1,1", 4: "2,2,1", 8: "2,2,2"},
    "v5p": {1: "1,1,1", 4: "2,2,1", 8: "2,2,2"},
    "v5e": {1: "1,1,1", 4: "2,2,1", 8: "2,4,1"},
    "v6e": {1: "1,1,1", 4: "2,2,1", 8: "2,4,1"},
    "v7": {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,2,2"},
}


def get_tpu_topology(world_size: int | None = None) -> tuple[str | None, int]:
    """``(topology, count)`` of this host's chips, or of its first ``world_size`` chips
    (ValueError above the host's count; a warning below it). ``(None, 0)`` without chips;
    RuntimeError when the generation has no single-host shape of that many chips."""
    detected = torch.tpu.device_count()
    if world_size is not None:
        if world_size > detected:
            raise ValueError(f"world_size {world_size} is more than this host's {detected} "
                             "simulated chips (set ACCELERATOR_TYPE, e.g. v6e-8, for more)")
        if world_size < detected:
            logging.getLogger(__name__).warning(
                "using world_size %d of the %d detected chips", world_size, detected)
    count = detected if world_size is None else int(world_size)
    if count <= 0:
        return None, 0
    generation = torch.tpu.get_device_properties(0).name.split()[1]
    shapes = _HOST_SHAPES.get(generation, {})
    if count not in shapes:
        raise RuntimeError(f"No TPU topology found for count: {count} (a {generation} host has "
                           f"single-host slices of {sorted(shapes)} chips)")
    return shapes[count], count
