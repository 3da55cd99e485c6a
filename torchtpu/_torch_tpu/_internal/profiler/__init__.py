"""``torch_tpu._internal.profiler``: TorchTPU's profiler entry points over torch.profiler and
torchtpu's device timeline (torchtpu/profiler.py)."""
import contextlib
import warnings

import torch
from torch.profiler import ProfilerActivity

from torchtpu.profiler import xprof_trace_handler

__all__ = ["ProfilerActivity", "profile", "register_kineto_backend", "xprof_trace_handler"]


@contextlib.contextmanager
def profile(activities=None, on_trace_ready=None, **kwargs):
    """``torch.profiler.profile`` as TorchTPU's wrapper takes it: ``on_trace_ready`` is required
    (ValueError otherwise), the activities default to CPU and TPU (with a warning), and GPU is
    refused. Yields the profiler."""
    if on_trace_ready is None:
        raise ValueError("on_trace_ready must be provided for profiler.profile.")
    if activities is None:
        warnings.warn("profile(): no activities given; tracing CPU and TPU")
        activities = [ProfilerActivity.CPU, ProfilerActivity.TPU]
    if any(a == ProfilerActivity.CUDA for a in activities):
        raise ValueError("profile(): the GPU activity is not available on tpu")
    with torch.profiler.profile(activities=activities, on_trace_ready=on_trace_ready,
                                **kwargs) as prof:
        yield prof


def register_kineto_backend() -> None:
    """Nothing to do: torchtpu registers its device timeline with Kineto when imported."""
