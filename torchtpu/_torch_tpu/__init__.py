"""``torch_tpu``: Google TorchTPU's package paths over torchtpu, for programs written for TorchTPU
(docs/coming-from-torchtpu.md; the table of names: docs/torch-tpu-api.md).

Imported as ``torch_tpu`` when no real TorchTPU is installed (torchtpu/_torch_tpu_finder.py).
Each name here is torchtpu's own feature under TorchTPU's name: nothing is implemented twice.
"""
import torch
import torchtpu  # noqa: F401  (registers the "tpu" device, torch.tpu and tpu_dist)
from torchtpu import _libtpu_flags

_libtpu_flags.define_absl_flag(import_absl=True)  # libtpu's flags on an absl command line

from torch_tpu import api  # noqa: F401
from torch_tpu._internal.precision import Precision, precision  # noqa: F401

__version__ = f"torchtpu-twin-{torch.__version__}"
__all__ = ["Precision", "api", "precision"]
