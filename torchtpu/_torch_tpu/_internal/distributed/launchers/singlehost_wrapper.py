"""TorchTPU's single-host launcher helper over torchtpu's simulated chips (docs/distributed.md).

    eval $(python -m torch_tpu._internal.distributed.launchers.singlehost_wrapper | sed 's/^/export /')
    torchrun --nproc_per_node=$WORLD_SIZE train.py

prints the host's slice topology (``TORCH_TPU_TOPOLOGY``, chips per axis as TorchTPU writes them,
"2,2,1"; torchtpu prices collectives on it), the slice builder addresses (empty: the simulator has
no slice builder service) and ``WORLD_SIZE``, the host's simulated chips (``ACCELERATOR_TYPE`` or
``TORCHTPU_NUM_DEVICES``: one rank per chip under torchrun).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from torch_tpu._internal.distributed.tpu_topology import get_tpu_topology
from torchtpu import config

__all__ = ["WorkerWrapper", "prepare_tpu_environment", "tpu_env_wrapper"]

def prepare_tpu_environment(world_size: int | None = None) -> None:
    """Sets the variables the workers read (in the main process, before they start): the
    topology (unless set), and a profiler session id shared by the workers."""
    os.environ.setdefault("TORCH_TPU_XPROF_SESSION_ID", str(time.time_ns()))
    topology, _ = get_tpu_topology(world_size)
    if config.raw("TORCH_TPU_TOPOLOGY") is None:
        if topology is None:
            raise ValueError("this host has no simulated chips (torch.tpu.device_count() is 0)")
        os.environ["TORCH_TPU_TOPOLOGY"] = topology
    os.environ.setdefault("TORCH_TPU_SLICEBUILDER_ADDRESSES", "")


class WorkerWrapper:
    """A picklable call of ``func(*args, **kwargs)`` for each worker (with the worker's own
    arguments appended), named like ``func`` as torch.distributed's launchers require."""

    def __init__(self, func: Callable[..., Any], *args: Any, **kwargs: Any):
        self.func, self.args, self.kwargs = func, args, kwargs
        self.__name__ = getattr(func, "__name__", repr(func))
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*self.args, *args, **{**self.kwargs, **kwargs})


def tpu_env_wrapper(func: Callable[..., Any], args, *, world_size: int | None = None,
                    **kwargs: Any) -> WorkerWrapper:
    prepare_tpu_environment(world_size)
    return WorkerWrapper(func, *args, **kwargs)


if __name__ == "__main__":
    topology, count = get_tpu_topology()
    print(f'TORCH_TPU_TOPOLOGY="{topology or ""}"')
    print('TORCH_TPU_SLICEBUILDER_ADDRESSES=""')
    print(f"WORLD_SIZE={count}")
