"""``torch_tpu._internal.sync``: materializing deferred tensors (TorchTPU's ``sync`` module)."""
from torch_tpu._internal.sync import sync  # noqa: F401
from torch_tpu._internal.sync.sync import is_materialized, is_materializing, synchronize  # noqa: F401

__all__ = ["is_materialized", "is_materializing", "sync", "synchronize"]
