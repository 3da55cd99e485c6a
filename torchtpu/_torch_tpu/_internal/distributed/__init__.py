"""``torch_tpu._internal.distributed``: TorchTPU's launch helpers (torchtpu's "tpu_dist" process
group is registered when torchtpu is imported: docs/distributed.md)."""
