"""``TraceMe(name)``: a named range around a block of host code (TorchTPU's xprof annotation).

torchtpu records it as ``torch.profiler.record_function(name)``: a range on the host row of
torch.profiler's trace (and so of ``torch.profiler.xprof_trace_handler``'s file; docs/insight.md),
enclosing the ops and device launches the block issued. Without an active profiler it costs a
function call. TorchTPU's own open-source build makes it a no-op."""
import contextlib

import torch

__all__ = ["TraceMe"]


class TraceMe(contextlib.AbstractContextManager):
    def __init__(self, name: str = "TraceMe", *args, **kwargs):
        # Further arguments (xprof's metadata key-values) are not recorded by torch.profiler.
        self._range = torch.profiler.record_function(str(name))

    def __enter__(self):
        self._range.__enter__()
        return self

    def __exit__(self, *exc):
        return self._range.__exit__(*exc)
