"""Backend tensor metadata of tpu tensors where torch 2.13 drops it (docs/runtime.md, "Tensor
metadata").

``torch._utils.set_tensor_metadata`` keeps a tpu tensor's keys on its ``TensorImpl``
(``csrc/api/BackendMeta.cpp``), which ``torch.save``/``torch.load``, ``detach()`` and ``.data``
carry. Two copies of a tensor that PyTorch makes itself build a new ``TensorImpl`` and drop them:

- fake tensors (``FakeTensorMode.from_tensor``, what torch.compile traces with): the fake tensor
  is made from a fresh meta tensor. PyTorch's proposed fix (pull request 186324) copies the real
  tensor's ``BackendMeta`` onto the fake one in ``FakeTensorConverter.from_real_tensor``,
  unwrapping a ``FunctionalTensor`` first; this does the same where torch lacks it;
- ``copy.deepcopy`` of a tensor or a parameter (a new tensor over a copied storage, or a clone),
  while pickling the same tensor (``torch.save``) keeps them.

Installed once, at import; each wrapper copies nothing unless the source is a tpu tensor.
"""
from __future__ import annotations

import functools

import torch

from . import _C

copy_backend_meta = _C.copy_backend_meta


def _fake_keeps_metadata(original):
    @functools.wraps(original)
    def from_real_tensor(self, fake_mode, t, *args, **kwargs):
        out = original(self, fake_mode, t, *args, **kwargs)
        if isinstance(out, torch.Tensor) and isinstance(t, torch.Tensor) and t.device.type == "tpu":
            inner = (torch._from_functional_tensor(t.elem)
                     if isinstance(t, torch._subclasses.functional_tensor.FunctionalTensor) else t)
            copy_backend_meta(inner, out)
        return out

    from_real_tensor._torchtpu_backend_meta = True
    return from_real_tensor


def _deepcopy_keeps_metadata(original):
    @functools.wraps(original)
    def __deepcopy__(self, memo):
        new = original(self, memo)
        if isinstance(new, torch.Tensor) and self.device.type == "tpu" and new is not self:
            copy_backend_meta(self, new)
        return new

    __deepcopy__._torchtpu_backend_meta = True
    return __deepcopy__


def install() -> None:
    from torch._subclasses.fake_tensor import FakeTensorConverter

    if not hasattr(torch._C, "_copy_backend_meta"):  # (a torch with the fix does it itself)
        converter = FakeTensorConverter.from_real_tensor
        if not getattr(converter, "_torchtpu_backend_meta", False):
            FakeTensorConverter.from_real_tensor = _fake_keeps_metadata(converter)
    for cls in (torch.Tensor, torch.nn.Parameter):
        deepcopy = cls.__dict__["__deepcopy__"]
        if not getattr(deepcopy, "_torchtpu_backend_meta", False):
            cls.__deepcopy__ = _deepcopy_keeps_metadata(deepcopy)
