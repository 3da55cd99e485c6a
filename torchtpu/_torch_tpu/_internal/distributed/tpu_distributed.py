"""TorchTPU's ``tpu_distributed`` helpers for SPMD-safe regions: ``enter_spmd_safe_region()`` and
``exit_spmd_safe_region()`` (which ``spmd_util.spmd_safe`` calls around its function), over
torchtpu.distributed's (docs/distributed.md, "Collectives inside fused eager's graphs")."""
from torchtpu.distributed import enter_spmd_safe_region, exit_spmd_safe_region, is_spmd_safe

__all__ = ["enter_spmd_safe_region", "exit_spmd_safe_region", "is_spmd_safe"]
