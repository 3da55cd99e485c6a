"""``spmd_safe``: TorchTPU's decorator for functions whose collectives may be recorded inside
fused eager's graphs (an SPMD-safe region, whatever ``TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_
TENSORS`` says), with the graph cut where the function starts and returns. torchtpu's own,
``torchtpu.distributed.spmd_safe`` (docs/distributed.md, "Collectives inside fused eager's
graphs")."""
from torchtpu.distributed import spmd_safe

__all__ = ["spmd_safe"]
