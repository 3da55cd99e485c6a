"""``torch_tpu.api._device_module``: the module registered as ``torch.tpu`` (torchtpu/tpu.py), and
``DeviceModule`` (also ``_DeviceModule``), the class Google TorchTPU registers as that module,
whose attributes its notebook helpers read and reset (tpu_utils.safe_init / safe_shutdown)."""
import torch

import torchtpu.tpu

from torchtpu.tpu import *  # noqa: F401,F403
from torchtpu.tpu import (  # noqa: F401
    _clear_cache, _get_cache_hits, _get_cache_misses, _get_cache_requests, _get_cache_stats,
    _get_dump_on_cache_miss, _hbm_usage_summary, _init_runtime, _init_runtime_options,
    _set_allow_cache, _set_cache_only, _set_dump_on_cache_miss, _shutdown_runtime)


class _DeviceModuleType(type):
    """Class-level attributes of DeviceModule: everything torch.tpu has, and the runtime's state.
    Resetting ``_is_initialized`` (TorchTPU's helpers do before starting it again) leaves the
    simulated runtime as it is: it starts once per process and stays usable."""

    @property
    def _is_initialized(cls) -> bool:
        return torchtpu.tpu.is_initialized()

    @_is_initialized.setter
    def _is_initialized(cls, value) -> None:
        pass

    def __getattr__(cls, name):
        return getattr(torchtpu.tpu, name)  # (not torch.tpu: that may be this class)


class DeviceModule(metaclass=_DeviceModuleType):
    _device_count = None
    _current_device = None


_DeviceModule = DeviceModule
