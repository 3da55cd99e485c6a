"""FlexAttention on tpu (docs/cuda-parity.md, "FlexAttention").

PyTorch 2.13's ``torch.nn.attention.flex_attention`` checks the device against a fixed set
(``_validate_device``: cuda, cpu, xpu, hpu, mps) and gives a backend no way to join it; past that
check nothing is device-specific: eager FlexAttention runs PyTorch's unfused implementation
(its ops run on tpu like any other), and ``torch.compile(backend="tpu")`` traces the same
higher-order op into ATen ops. When the module is imported this hook wraps the check so that
tpu tensors pass it, as CUDA's do (forward and backward); the other devices keep PyTorch's
check and its errors. The wrap is made only on the torch version it was checked against
(``_CHECKED``): on another one the module is left alone and FlexAttention refuses tpu tensors as
PyTorch wrote it.
"""
from __future__ import annotations

from ._import_hooks import after_import

_MODULE = "torch.nn.attention.flex_attention"
_CHECKED = ("2.13.",)


def _patch(module) -> None:
    import torch

    original = getattr(module, "_validate_device", None)
    if original is None or getattr(original, "_torchtpu", False):
        return
    if not torch.__version__.startswith(_CHECKED):
        return

    def _validate_device(query, key, value) -> None:
        if query.device.type == "tpu":
            return
        original(query, key, value)

    _validate_device._torchtpu = True
    _validate_device.__doc__ = original.__doc__
    module._validate_device = _validate_device


def install() -> None:
    after_import(_MODULE, _patch)
