"""``torch_tpu._internal.device._device_module``: TorchTPU's device-module class
(``_DeviceModule``, also ``DeviceModule`` and ``TpuDeviceModule``), the one
``torch_tpu.api._device_module`` gives: every attribute is torch.tpu's (torchtpu/tpu.py).

TorchTPU registers its device module when its runtime starts, and its lower-level programs
register it themselves: ``torch._register_device_module("tpu", _device_module._DeviceModule)``,
which PyTorch refuses for a device type that has a module already. torchtpu registers torchtpu.tpu
as ``torch.tpu`` when it is imported, so importing this module withdraws that registration, as
TorchTPU's import would find it: the program's own call then succeeds and ``torch.tpu`` is the
class, which reads every attribute from torchtpu.tpu. ``torch_tpu.api.tpu_device()`` registers
torchtpu.tpu again if nothing has by then."""
import sys

import torch

import torchtpu.tpu
from torch_tpu.api._device_module import DeviceModule, _DeviceModule  # noqa: F401

TpuDeviceModule = DeviceModule
__all__ = ["DeviceModule", "TpuDeviceModule", "_DeviceModule"]

if getattr(torch, "tpu", None) is torchtpu.tpu:
    del torch.tpu
    sys.modules.pop("torch.tpu", None)
