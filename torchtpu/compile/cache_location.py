"""Where compiled mode's disk cache lives (docs/compiled-mode.md, "The compilation cache"): one
directory it works in, and one it also keeps its entries in. Light on purpose: the backend asks
whether the cache is on for every Dynamo graph, and the cache itself (``cache.py``)
imports parts of Inductor.

Two sets of variables choose them, torchtpu's and Google TorchTPU's tiers:

- ``TORCHTPU_CACHE_DIR``: one directory, kept across runs.
- TorchTPU's tier-3 root, ``TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT`` (or
  ``TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT``): a directory kept across runs and hosts (a shared
  file system). A ``gs://`` root needs Cloud Storage, which torchtpu does not reach: it is
  ignored, with a warning.
- TorchTPU's tier-2 cache, ``TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE=name`` (or
  ``TORCH_TPU_TIER2_COMPILATION_CACHE``): a directory in the host's shared memory,
  ``/dev/shm/torch_tpu_cache/<name>``, shared by the host's processes; ``disabled`` turns it off.
  Unset or empty, it is on with the name ``default`` when a tier-3 root is set or the world size
  (``WORLD_SIZE``, as torchrun sets it) is above 1, as in TorchTPU.

With the tier-2 cache on, the cache works there; entries missing from it are read from the
directory kept across runs (``TORCHTPU_CACHE_DIR`` or the tier-3 root) and new entries are
written to both. Without it, the cache works in the directory kept across runs. Each directory
holds this build's entries under ``build-<hash>`` (``cache.directory``).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from .. import config

TIER2_ROOT = "/dev/shm/torch_tpu_cache"


@dataclass(frozen=True)
class Location:
    working: str | None  # where PyTorch's AOTAutograd cache reads and writes
    kept: str | None  # entries also read from and written to (with a tier-2 working directory)
    tier2: bool = False  # the working directory is the tier-2 cache


_warned_gs = False


def _tier3_root() -> str | None:
    global _warned_gs
    root = (config.get("TORCH_TPU_INTERNAL_TIER3_COMPILATION_CACHE_ROOT")
            or config.get("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT"))
    if root and root.startswith("gs://"):
        if not _warned_gs:
            warnings.warn(f"torchtpu: the tier-3 compilation cache root {root!r} is a Cloud "
                          f"Storage bucket, which torchtpu does not reach; it is ignored. Give a "
                          f"local or mounted directory instead.", stacklevel=3)
            _warned_gs = True
        return None
    return root


def _tier2_name(tier3: bool) -> str | None:
    name = (config.get("TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE")
            or config.get("TORCH_TPU_TIER2_COMPILATION_CACHE"))
    if name == "disabled":
        return None
    if name:
        return name
    try:
        world_size = int(config.value("WORLD_SIZE"))
    except ValueError:
        world_size = 1
    return "default" if tier3 or world_size > 1 else None


def location() -> Location:
    """The cache's directories now (the variables are read at each compilation)."""
    kept = config.get("TORCHTPU_CACHE_DIR")
    tier3 = _tier3_root()
    kept = kept or tier3
    name = _tier2_name(tier3 is not None)
    if name is None:
        return Location(working=kept, kept=None)
    if "/" in name or name in (".", ".."):
        raise ValueError(f"the tier-2 compilation cache name must be one directory name, got "
                         f"{name!r} (TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE)")
    return Location(working=os.path.join(TIER2_ROOT, name), kept=kept, tier2=True)


def enabled() -> bool:
    return location().working is not None
