"""TorchTPU's ``utils`` module: ``assert_close`` (with ``CheckValueMode``; the comparison is
test_utils.py's) and ``open_output``. The tracers (``OpTracer``, ``ActivationTracer``: in tracers.py) and the printing helpers (``format_model``, ``get_tensor_summary``, ...: in
model_format.py) are TorchTPU's names in this module too."""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import torch
from torch_tpu._internal.execution_mode import EagerMode
from torch_tpu._internal.utils.test_utils import CheckValueMode, Tolerance, compare
from torch_tpu._internal.utils.model_format import (InputMetadata, format_model, format_tensor,
                                                    get_tensor_summary, model_memory)
from torch_tpu._internal.utils.tracers import ActivationTracer, Event, OpTracer, TensorMeta

__all__ = ["ActivationTracer", "CheckValueMode", "EagerMode", "Event", "InputMetadata",
           "OpTracer", "TensorMeta", "Tolerance", "assert_close", "format_model",
           "format_tensor", "get_tensor_summary", "model_memory", "open_output"]


def assert_close(actual: Any, expected: Any, rtol: float | None = None,
                 atol: Tolerance | None = None, preamble: str | None = None,
                 check_value: CheckValueMode = CheckValueMode.LOOSE,
                 check_dtype: bool = True) -> None:
    """TorchTPU's older name for test_utils.assert_close (the same comparison and report), which
    takes an explicit ``CheckValueMode.LOOSE``."""
    compare(actual, expected, rtol, atol, preamble, check_value or CheckValueMode.LOOSE,
            check_dtype)


@contextlib.contextmanager
def open_output(path: str | None, mode: str = "w", default=None):
    """The file at ``path`` (``~`` expanded) opened in ``mode``, or ``default`` (standard output
    when None) left open when ``path`` is None or empty."""
    if not path:
        yield sys.stdout if default is None else default
        return
    with open(os.path.abspath(os.path.expanduser(path)), mode) as f:
        yield f
