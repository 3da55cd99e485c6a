"""Custom ops without a tpu kernel read device memory in order (docs/eager-modes.md, "C++ extensions").

A C++ extension's op registered as a composite op (``TORCH_LIBRARY`` with ``m.def(schema, fn)``)
and called through ``torch.ops`` runs its own C++ on the arguments: it may read or write their
memory through ``data_ptr()`` between its own ops, where torchtpu sees nothing. On "tpu" that
memory may not hold its values yet: in strict eager the work writing it may still be queued, in
fused eager the tensor may be pending (no memory at all, a page that faults when read).

Every op of a namespace other than PyTorch's own that has no kernel registered for "tpu" is
called inside ``torchtpu._C._ForeignOp`` (``api::ForeignOp``) when one of its arguments is a tpu
tensor: the work recorded or queued before it runs first (every pending tensor gets memory and
values; counted as the materialization "custom op without a tpu kernel"), and the ops the op
itself issues run synchronously, as in debug eager, so the tensors it allocates have memory.
Ops with a tpu kernel (``m.impl(..., "PrivateUse1", ...)``) are torchtpu's business as any op's
and are called as they are.

The op objects are wrapped where ``torch.ops.<namespace>.<name>`` makes them
(``torch._ops._OpNamespace.__getattr__``), once per op, so ops of PyTorch's namespaces (aten,
prims, ...) never pass through Python here.
"""
from __future__ import annotations

import torch
from torch.utils import _pytree

from . import _C

# Namespaces of PyTorch's own ops: their kernels are PyTorch's and torchtpu's, never foreign code.
_PYTORCH_NAMESPACES = frozenset({
    "aten", "prim", "prims", "quantized", "_quantized", "quantized_decomposed", "rngprims",
    "profiler", "c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "inductor",
    "higher_order", "debugprims", "mkldnn", "onednn", "fbgemm", "symm_mem", "_test", "torchtpu",
})


def _has_tpu_tensor(args, kwargs) -> bool:
    for leaf in _pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "tpu":
            return True
    return False


def _foreign(qualified_name: str, overload: str = "") -> bool:
    namespace = qualified_name.split("::", 1)[0]
    if namespace in _PYTORCH_NAMESPACES:
        return False
    name = qualified_name if not overload else f"{qualified_name}.{overload}"
    try:
        return not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")
    except RuntimeError:
        return False


class _ForeignOpOverload(torch._ops.OpOverload):
    def __call__(self, /, *args, **kwargs):
        if not _has_tpu_tensor(args, kwargs):
            return self._op(*args, **kwargs)
        scope = _C._ForeignOp()  # noqa: F841  (alive for the call)
        try:
            return self._op(*args, **kwargs)
        finally:
            del scope


class _ForeignOpOverloadPacket(torch._ops.OpOverloadPacket):
    def __call__(self, /, *args, **kwargs):
        if not _has_tpu_tensor(args, kwargs):
            return super().__call__(*args, **kwargs)
        scope = _C._ForeignOp()  # noqa: F841  (alive for the call)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            del scope

    def __getattr__(self, key):
        overload = super().__getattr__(key)
        if type(overload) is torch._ops.OpOverload and _foreign(
                self._qualified_op_name, overload._schema.overload_name):
            overload.__class__ = _ForeignOpOverload
        return overload


def install() -> None:
    namespace_class = torch._ops._OpNamespace
    original = namespace_class.__getattr__
    if getattr(original, "_torchtpu", False):
        return

    def __getattr__(self, op_name):
        packet = original(self, op_name)
        if type(packet) is torch._ops.OpOverloadPacket and _foreign(packet._qualified_op_name):
            packet.__class__ = _ForeignOpOverloadPacket
        return packet

    __getattr__._torchtpu = True
    namespace_class.__getattr__ = __getattr__
