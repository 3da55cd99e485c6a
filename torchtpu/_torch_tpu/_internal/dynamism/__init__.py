"""``torch_tpu._internal.dynamism``: TorchTPU's manual bounded dynamism (``mark_dynamic``,
``get_dynamism_info``; docs/coming-from-torchtpu.md).

TorchTPU: ``mark_dynamic(t, dimension, lower_bound, upper_bound)`` tells its fused eager that
``t``'s size along ``dimension`` varies within the bounds, so the graphs that read ``t`` are
compiled once, padded to the upper bound, and every size within the bounds reuses that
executable instead of compiling another. One dynamic dimension per tensor; a new mark replaces
the old one.

torchtpu: the mark is checked as TorchTPU checks it (a tpu tensor, the dimension in range,
``lower_bound <= size <= upper_bound``, one dynamic dimension) and kept on the tensor as backend
metadata (``torch._utils.set_tensor_metadata``; torchtpu/_backend_meta.py), which ``detach()``,
``.data``, ``copy.deepcopy``, ``torch.save`` and the fake tensors of ``torch.compile`` carry;
``get_dynamism_info`` reads it back. Fused eager does not use it: its plans are made per concrete
size (docs/design.md 3.1), so each new size inside the bounds is a plan-cache miss where TorchTPU
hits, and work is charged at the tensor's own size, not padded to the bound. Values are the same.
For one program over a range of sizes with the cost of a padded TPU program, compile the code:
``torch.compile(..., backend=TpuBackend(dynamism=True))`` (or ``backend="tpu"``) gives symbolic
sizes, charged per bucket (docs/compiled-mode.md, "Buckets of dynamic sizes"). A warning says so
the first time a process marks a tensor.
"""
from __future__ import annotations

import dataclasses
import warnings

import torch

__all__ = ["BoundedDynamicDimension", "get_dynamism_info", "mark_dynamic"]

_PREFIX = "torch_tpu.bounded_dynamism:"  # backend-metadata key: prefix + "dim:lower:upper"
_warned = False


@dataclasses.dataclass(frozen=True)
class BoundedDynamicDimension:
    """One dynamic dimension of a tensor and its bounds (TorchTPU's ``BoundedDynamicDimension``)."""
    dimension: int
    lower_bound: int
    upper_bound: int


def _check_tpu(tensor, what: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(tensor).__name__}")
    if tensor.device.type != "tpu":
        raise RuntimeError(f"{what}: tensor is not on the PrivateUse1 device (tpu): it is on "
                           f"{tensor.device}")


def _other_metadata(tensor) -> dict:
    return {k: v for k, v in torch._utils.get_tensor_metadata(tensor).items()
            if not k.startswith(_PREFIX)}


def get_dynamism_info(tensor: torch.Tensor) -> list[BoundedDynamicDimension]:
    """The tensor's dynamic dimensions with their bounds: empty when none is marked."""
    _check_tpu(tensor, "get_dynamism_info")
    found = []
    for key, value in torch._utils.get_tensor_metadata(tensor).items():
        if value and key.startswith(_PREFIX):
            dim, lower, upper = (int(x) for x in key[len(_PREFIX):].split(":"))
            found.append(BoundedDynamicDimension(dim, lower, upper))
    return found


def mark_dynamic(tensor: torch.Tensor, dimension: int, lower_bound: int,
                 upper_bound: int) -> torch.Tensor:
    """Marks ``tensor``'s size along ``dimension`` as varying within ``[lower_bound,
    upper_bound]`` and returns ``tensor``. RuntimeError (TorchTPU's messages) for a tensor not on
    tpu, a dimension out of range, a size outside the bounds, or a second dynamic dimension.
    torchtpu keeps and reports the mark; fused eager still plans per size (this module's
    docstring)."""
    global _warned
    _check_tpu(tensor, "mark_dynamic")
    dimension, lower_bound, upper_bound = int(dimension), int(lower_bound), int(upper_bound)
    if not 0 <= dimension < tensor.dim():
        raise RuntimeError(f"mark_dynamic: dimension {dimension} is out of bounds for a tensor of "
                           f"{tensor.dim()} dimensions")
    size = tensor.shape[dimension]
    if not 0 <= lower_bound <= size <= upper_bound:
        raise RuntimeError(f"mark_dynamic: the bounds are [{lower_bound}, {upper_bound}] but the "
                           f"dimension size is {size}")
    marked = get_dynamism_info(tensor)
    if any(m.dimension != dimension for m in marked):
        raise RuntimeError(f"mark_dynamic: only one dynamic dimension is supported per tensor "
                           f"(dimension {marked[0].dimension} is marked already)")
    metadata = _other_metadata(tensor)
    metadata[f"{_PREFIX}{dimension}:{lower_bound}:{upper_bound}"] = True
    torch._utils.set_tensor_metadata(tensor, metadata)
    if not _warned:
        _warned = True
        warnings.warn(
            "torch_tpu dynamism.mark_dynamic: the bounds are kept on the tensor "
            "(get_dynamism_info), but torchtpu's fused eager plans each size it meets instead of "
            "one program padded to the upper bound; values are unchanged. Compile the code "
            "(TpuBackend(dynamism=True)) for one program priced per bucket of sizes "
            "(docs/coming-from-torchtpu.md)", stacklevel=2)
    return tensor
