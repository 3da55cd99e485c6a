"""``torch_tpu._internal.distributed``: TorchTPU's launch helpers (``tpu_topology``: the host's
slice topology; ``launchers``: setting up torchrun's workers) and SPMD-safe regions
(``spmd_util.spmd_safe``, ``tpu_distributed.enter_spmd_safe_region`` / ``exit_...``). torchtpu's
"tpu_dist" process group is registered when torchtpu is imported (docs/distributed.md)."""
