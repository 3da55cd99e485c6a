"""``torch_tpu._internal.sync``: materializing deferred tensors (TorchTPU's ``sync`` module)."""
from torch_tpu._internal.sync import sync  # noqa: F401
from torch_tpu._internal.sync.sync import (  # noqa: F401
    computation_graphviz, computation_mlir, dump_computation_graphviz, dump_computation_mlir,
    is_materialized, is_materializing, synchronize)

__all__ = ["computation_graphviz", "computation_mlir", "dump_computation_graphviz",
           "dump_computation_mlir", "is_materialized", "is_materializing", "sync", "synchronize"]
