"""``torch.profiler.xprof_trace_handler``: Google TorchTPU's trace handler, over torchtpu's
profiler integration (docs/insight.md, "Profiler").

TorchTPU's handler writes XPlane files for TensorBoard's profile plugin (xprof). torchtpu's
device timeline is a Kineto trace (one kernel event per launch, lasting its estimate), so this
handler writes what ``torch.profiler.tensorboard_trace_handler`` writes: a Chrome-trace JSON file
per trace (``<worker>.<time>.pt.trace.json``) that TensorBoard's PyTorch profiler plugin,
Perfetto (ui.perfetto.dev) and chrome://tracing open.
"""
from __future__ import annotations

import os
from typing import Callable

import torch

from . import config

__all__ = ["xprof_trace_handler"]


def xprof_trace_handler(dir_name: "str | os.PathLike | None" = None,
                        worker_rank: str | None = None) -> Callable:
    """An ``on_trace_ready`` callback writing each trace into ``dir_name`` (default:
    ``TPU_PROFILER_OUTPUT_DIR``, TorchTPU's variable). It returns the directory; its
    ``worker_rank`` names the files (default: host and process id, as PyTorch names them)."""
    directory = dir_name if dir_name is not None else config.get("TPU_PROFILER_OUTPUT_DIR")
    if not directory:
        raise ValueError("xprof_trace_handler needs dir_name (or TPU_PROFILER_OUTPUT_DIR)")
    directory = os.fspath(directory)
    write = torch.profiler.tensorboard_trace_handler(directory, worker_name=worker_rank)

    def handler(prof) -> str:
        if prof is not None:
            write(prof)
        return directory

    handler.worker_rank = worker_rank
    return handler


def install() -> None:
    """Adds the handler to ``torch.profiler`` (PyTorch has no such name to replace)."""
    if not hasattr(torch.profiler, "xprof_trace_handler"):
        torch.profiler.xprof_trace_handler = xprof_trace_handler
