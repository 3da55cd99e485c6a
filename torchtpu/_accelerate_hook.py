"""Hugging Face Accelerate picks "tpu" as transformers does (docs/design.md, "Libraries").

transformers' TrainingArguments put a Trainer's model on tpu:0 when torchtpu is loaded
(``is_torch_tpu_available()``), but Accelerate, which the Trainer uses to move each batch, only
knows its own list of devices and falls back to the CPU: the model on tpu:0, the batches on the
CPU ("Expected all tensors to be on the same device"). When ``accelerate.state`` is imported,
this hook wraps ``PartialState.default_device`` so that where Accelerate would fall back to the
CPU it takes the current tpu device. ``cpu=True`` (``TrainingArguments(use_cpu=True)``) and an
explicit ``ACCELERATE_TORCH_DEVICE`` keep their meaning: Accelerate consults ``default_device``
only when neither is given.

The hook is a finder on ``sys.meta_path`` that patches the module once it has executed, so
importing torchtpu does not import Accelerate.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

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


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name):  # the rest of the loader's interface (get_source, ...)
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    if _MODULE in sys.modules:  # Accelerate came first
        _patch(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
