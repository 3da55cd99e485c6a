"""``torch_tpu._internal.precision``: the MXU precision of float32 matmuls (torchtpu/tpu.py)."""
from torch_tpu._internal.precision.precision import Precision, precision  # noqa: F401

__all__ = ["Precision", "precision"]
