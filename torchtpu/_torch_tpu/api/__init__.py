"""``torch_tpu.api``: starting the device (TorchTPU's ``tpu_device()``)."""
import functools

import torch

__all__ = ["tpu_device"]


@functools.lru_cache(maxsize=None)
def tpu_device() -> torch.device:
    """Starts the runtime and returns ``torch.device("tpu")``, as TorchTPU's does.

    torchtpu registers the device, ``torch.tpu`` and the ``tpu_dist`` process-group backend when
    it is imported; this starts the runtime, binds a torchrun worker to its chip (tpu:LOCAL_RANK,
    as TorchTPU binds one chip per process) and registers ``torch.tpu`` again when a program
    withdrew it (torch_tpu/_internal/device/_device_module.py). Wherever PyTorch takes it, it
    means the current chip, as ``"cuda"`` does: the tensors made on it carry their chip's index
    (``tpu:0``, as CUDA's ``cuda:0``), as TorchTPU's qwen3 tests check of its moved modules,
    also under ``torch.set_default_device(tpu_device())`` (docs/coming-from-torchtpu.md).
    Cached, as TorchTPU's is (``tpu_device.cache_clear()`` works)."""
    import torchtpu.distributed
    import torchtpu.tpu
    from torch_tpu._loader import _init_device

    _init_device("tpu")  # torch.tpu, registered again if a program withdrew it
    torchtpu.tpu.init()
    torchtpu.distributed.bind_local_rank()
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
