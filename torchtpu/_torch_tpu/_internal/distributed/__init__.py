"""``torch_tpu._internal.distributed``: TorchTPU's launch helpers (``tpu_topology``: the host's
slice topology; ``launchers``: setting up torchrun's workers). torchtpu's "tpu_dist" process
group is registered when torchtpu is imported (docs/distributed.md)."""
