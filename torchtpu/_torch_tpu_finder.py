"""Makes ``import torch_tpu`` give torchtpu's twin of Google TorchTPU's package
(torchtpu/_torch_tpu/; docs/coming-from-torchtpu.md) when no real TorchTPU is installed.

The finder goes last on ``sys.meta_path``: Python's own finders look for a ``torch_tpu`` on
``sys.path`` first, so a real TorchTPU install is always the one imported. It is installed when
Python starts (the ``torchtpu-torch_tpu.pth`` file setup.py puts in site-packages) and when
torchtpu is imported, and it imports nothing until ``torch_tpu`` is asked for.
"""
from __future__ import annotations

import importlib.util
import os
import sys

PACKAGE = "torch_tpu"


class TorchTpuTwinFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != PACKAGE:
            return None  # (its submodules are found through the package's __path__)
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_tpu")
        return importlib.util.spec_from_file_location(
            PACKAGE, os.path.join(root, "__init__.py"), submodule_search_locations=[root])


def install() -> None:
    if not any(getattr(f, "__name__", None) == "TorchTpuTwinFinder" for f in sys.meta_path):
        sys.meta_path.append(TorchTpuTwinFinder)
