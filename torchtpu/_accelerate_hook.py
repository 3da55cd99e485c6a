"""Hugging Face Accelerate picks "tpu" as transformers does (docs/design.md, "Libraries").

transformers' TrainingArguments put a Trainer's model on tpu:0 when torchtpu is loaded
(``is_torch_tpu_available()``), but Accelerate, which the Trainer uses to move each batch, only
knows its own list of devices and falls back to the CPU: the model on tpu:0, the batches on the
CPU ("Expected all tensors to be on the same device"). When ``accelerate.state`` is imported,
this hook wraps ``PartialState.default_device`` so that where Accelerate would fall back to the
CPU it takes the current tpu device. ``cpu=True`` (``TrainingArguments(use_cpu=True)``) and an
explicit ``ACCELERATE_TORCH_DEVICE`` keep their meaning: Accelerate consults ``default_device``
only when neither is given.

The module is patched once it has executed (``_import_hooks.after_import``), so importing
torchtpu does not import Accelerate.
"""
from __future__ import annotations

from ._import_hooks import after_import

_MODULE = "accelerate.state"


def _patch(state_module) -> None:
    import torch

    cls = state_module.PartialState
    original = cls.default_device
    if getattr(original, "_torchtpu", False):
        return

    def default_device(self) -> torch.device:
        device = original.fget(self)
        if device.type == "cpu" and torch.tpu.is_available():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    default_device.__doc__ = (original.__doc__ or "") + "\n        - TPU (torchtpu) before the CPU\n"
    prop = property(default_device)
    prop.fget._torchtpu = True
    cls.default_device = prop


def install() -> None:
    after_import(_MODULE, _patch)  # now if Accelerate came first, else once it is imported
