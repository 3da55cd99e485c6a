"""``torch_tpu.api``: starting the device (TorchTPU's ``tpu_device()``)."""
import functools

import torch

__all__ = ["tpu_device"]


@functools.lru_cache(maxsize=None)
def tpu_device() -> torch.device:
    """Starts the runtime and returns ``torch.device("tpu")``. torchtpu registers the device,
    ``torch.tpu`` and the ``tpu_dist`` process-group backend when it is imported; this only
    starts the runtime (and registers ``torch.tpu`` again when a program withdrew it:
    torch_tpu/_internal/device/_device_module.py). Cached, as TorchTPU's is
    (``tpu_device.cache_clear()`` works)."""
    import torchtpu.tpu

    if not hasattr(torch, "tpu"):
        torch._register_device_module("tpu", torchtpu.tpu)
    torchtpu.tpu.init()
    return torch.device("tpu")


def _xla_cpu_device() -> torch.device:
    raise NotImplementedError(
        "torch_tpu.api._xla_cpu_device(): torchtpu simulates the TPU itself and has no XLA "
        "device; trace with torch.export or torch.compile(backend='tpu') instead "
        "(docs/coming-from-torchtpu.md)")


def _xla_cuda_device() -> torch.device:
    raise NotImplementedError(
        "torch_tpu.api._xla_cuda_device(): torchtpu simulates the TPU itself and has no XLA "
        "device (docs/coming-from-torchtpu.md)")
