"""``torch_tpu._loader``: TorchTPU's loading step, ``load()`` (its ``torch.backends`` autoload
entry point, and what Ray Train calls before ``init_process_group("tpu_dist")``:
``ray.air._internal.device_manager.tpu``; docs/ecosystem.md, "Ray").

TorchTPU's ``load()`` makes the "tpu" device, ``torch.tpu``, the ``tpu_dist`` process group and
the profiler's device timeline appear when the host has TPU chips, and sets ``_LOADED``. torchtpu
registers all of them when it is imported (which ``import torch_tpu`` does), so ``load()`` here
checks that they are still there, puts back ``torch.tpu`` when a program withdrew it (as
``torch_tpu.api.tpu_device()`` does) and sets ``_LOADED`` as TorchTPU does: True when this
process sees a chip. It does not start the runtime or pick a chip: a ``tpu_dist`` group binds a
worker to tpu:LOCAL_RANK when it is made (torchtpu/distributed.py), as TorchTPU's runtime binds
a process to its chip.

TorchTPU falls back to XLA devices on the host CPU or a GPU (``xla_cpu``, ``xla_cuda``) when
there is no chip and ``allow_xla_backend`` (or ``TORCH_TPU_INTERNAL_ALLOW_XLA_BACKEND=1``) asks
for them; torchtpu has no XLA device, so that request raises NotImplementedError, as
``torch_tpu.api._xla_cpu_device()`` does.
"""
from __future__ import annotations

import threading

import torch

from torchtpu import config

__all__ = ["load"]

# Whether load() found a device to load, as TorchTPU's flag.
_LOADED: bool = False

_INIT_LOCK = threading.Lock()


def _init_device_impl(device: str) -> torch.device:
    if device != "tpu":
        from torch_tpu.api import _xla_cpu_device, _xla_cuda_device

        (_xla_cuda_device if device == "xla_cuda" else _xla_cpu_device)()
    import torchtpu.distributed
    import torchtpu.tpu

    torch._register_device_module("tpu", torchtpu.tpu)
    torchtpu.distributed.register()  # (registered when torchtpu loaded: a no-op then)
    return torch.device("tpu")


def _init_device(device: str) -> torch.device:
    """Registers ``device`` unless ``torch`` has it ("tpu": ``torch.tpu`` again when a program
    withdrew it, torch_tpu/_internal/device/_device_module.py; "xla_cpu" and "xla_cuda" raise
    NotImplementedError). TorchTPU caches it; here the check is kept on every call, so a
    ``torch.tpu`` withdrawn after a first call is registered again: ``torch_tpu.api.tpu_device()``
    registers through this too."""
    with _INIT_LOCK:
        if hasattr(torch, device):
            return torch.device(device)
        return _init_device_impl(device)


def load(allow_xla_backend: bool | None = None) -> None:
    """Loads the tpu backend: ``torch.device("tpu")``, ``torch.tpu`` and the ``tpu_dist``
    process group, and sets ``_LOADED`` when this process sees a chip
    (``torch.tpu.device_count()``: ``TPU_VISIBLE_CHIPS`` and the other variables of
    docs/torch-tpu-api.md, rows 65-69). Without a chip, ``allow_xla_backend=True`` (or
    ``TORCH_TPU_INTERNAL_ALLOW_XLA_BACKEND=1``) asks for TorchTPU's XLA devices, which torchtpu
    does not have: NotImplementedError. Calling it again does nothing more."""
    global _LOADED
    import torchtpu.tpu

    if torchtpu.tpu.device_count():
        _init_device("tpu")
        _LOADED = True
    elif allow_xla_backend or (
            allow_xla_backend is None
            and int(config.value("TORCH_TPU_INTERNAL_ALLOW_XLA_BACKEND"))):
        _init_device("xla_cpu")
