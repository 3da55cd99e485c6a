"""``precision(Precision.X)``: torch.tpu's precision scope, which takes TorchTPU's enum."""
from torchtpu.tpu import Precision, precision  # noqa: F401

__all__ = ["Precision", "precision"]
