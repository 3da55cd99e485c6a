"""TorchTPU's ``utils.assert_close`` (with ``CheckValueMode``) and ``open_output``, written for
torchtpu: comparing a tpu result with a reference, with a report of where they part and the
tolerances that would have accepted them. The tracers (``OpTracer``, ``ActivationTracer``: in
tracers.py) and the printing helpers (``format_model``, ``get_tensor_summary``, ...: in
model_format.py) are TorchTPU's names in this module too."""
from __future__ import annotations

import collections.abc
import contextlib
import enum
import math
import os
import sys
from typing import Any, Callable, Union

import torch
from torch_tpu._internal.execution_mode import EagerMode
from torch_tpu._internal.utils.model_format import (InputMetadata, format_model, format_tensor,
                                                    get_tensor_summary, model_memory)
from torch_tpu._internal.utils.tracers import ActivationTracer, Event, OpTracer, TensorMeta

__all__ = ["ActivationTracer", "CheckValueMode", "EagerMode", "Event", "InputMetadata",
           "OpTracer", "TensorMeta", "Tolerance", "assert_close", "format_model",
           "format_tensor", "get_tensor_summary", "model_memory", "open_output"]

# An absolute tolerance, or a function of the expected value giving it (rtol must then be None).
Tolerance = Union[float, Callable[[float], float]]


class CheckValueMode(enum.Enum):
    """SKIP: shapes and dtypes only. LOOSE: ``|actual - expected| <= atol + rtol * |expected|``
    (torch.testing.assert_close's rule). STRICT: ``|actual - expected| <= atol`` and
    ``<= rtol * |expected|`` both (a relative bound even near zero; give both tolerances)."""

    SKIP = "skip"
    LOOSE = "loose"
    STRICT = "strict"


def assert_close(actual: Any, expected: Any, rtol: float | None = None,
                 atol: Tolerance | None = None, preamble: str | None = None,
                 check_value: CheckValueMode = CheckValueMode.LOOSE,
                 check_dtype: bool = True) -> None:
    """Asserts that ``actual`` and ``expected`` (tensors, or sequences of them, compared item by
    item) agree. Omitted tolerances are torch.testing's defaults for the dtype. On a mismatch the
    AssertionError says how many elements differ, the largest absolute and relative errors and
    where, the first values that differ, and the smallest tolerances that would have passed."""
    if actual is None or expected is None:
        assert actual is None and expected is None, (
            f"both values must be None or neither: actual={actual!r}, expected={expected!r}")
        return
    sequences = [isinstance(v, collections.abc.Sequence) and not isinstance(v, str)
                 for v in (actual, expected)]
    assert sequences[0] == sequences[1], (
        "actual and expected must both be sequences or both be single values")
    if sequences[0]:
        assert len(actual) == len(expected), (
            f"{len(actual)} actual values against {len(expected)} expected ones")
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol, atol, preamble, check_value, check_dtype)
        return
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor), (
        f"expected tensors, got {type(actual).__name__} and {type(expected).__name__}")
    _assert_tensor_close(actual, expected, rtol, atol, preamble or "", check_value, check_dtype)


def _assert_tensor_close(actual, expected, rtol, atol, preamble, mode, check_dtype) -> None:
    head = preamble.rstrip() + "\n" if preamble else ""
    if actual.shape != expected.shape:
        raise AssertionError(f"{head}Tensor shape mismatch: expected {tuple(expected.shape)}, "
                             f"got {tuple(actual.shape)}")
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{head}Tensor dtype mismatch: expected {expected.dtype}, "
                             f"got {actual.dtype}")
    if mode == CheckValueMode.SKIP:
        return
    if callable(atol) and rtol is not None:
        raise ValueError("rtol must be None when atol is a function of the expected value")
    if mode == CheckValueMode.STRICT and (rtol is None or atol is None or callable(atol)):
        raise ValueError("CheckValueMode.STRICT needs both rtol and atol (a number)")
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    dtype = torch.promote_types(a.dtype, e.dtype)
    if dtype.is_complex or dtype.is_floating_point:
        wide = torch.complex128 if dtype.is_complex else torch.float64
    else:
        wide = torch.float64
    a, e = a.to(wide), e.to(wide)
    if not callable(atol) and (rtol is None or atol is None):
        default_rtol, default_atol = torch.testing._comparison.default_tolerances(
            actual.to(dtype) if actual.dtype != dtype else actual,
            expected.to(dtype) if expected.dtype != dtype else expected)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
    error = (a - e).abs()
    size = e.abs()
    nan_equal = torch.isnan(a) & torch.isnan(e)
    inf_equal = torch.isinf(a) & torch.isinf(e) & (a == e)
    if callable(atol):
        bound = e.real.clone().apply_(lambda v: atol(v)) if e.numel() else e.real
        bad = ~(error <= bound)
    elif mode == CheckValueMode.STRICT:
        bad = ~((error <= atol) & (error <= rtol * size))
    else:
        bad = ~(error <= atol + rtol * size)
    bad &= ~(nan_equal | inf_equal)
    count = int(bad.sum())
    if count == 0:
        return
    raise AssertionError(head + _report(a, e, error, size, bad, count, rtol, atol, mode))


def _report(a, e, error, size, bad, count, rtol, atol, mode) -> str:
    finite = ~torch.isnan(error)
    abs_err = torch.where(finite, error, torch.zeros_like(error))
    rel_err = torch.where(size > 0, abs_err / size.clamp_min(1e-300),
                          torch.where(abs_err > 0, torch.full_like(abs_err, math.inf), abs_err))
    lines = [f"Tensor-likes are not close! ({mode.name.lower()} check)",
             f"Mismatched elements: {count} / {e.numel()} ({100.0 * count / e.numel():.1f}%)"]
    for name, values in (("absolute", abs_err), ("relative", rel_err)):
        flat = int(values.reshape(-1).argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)) \
            if e.dim() else ()
        lines.append(f"Greatest {name} difference: {float(values.reshape(-1)[flat]):.6g} "
                     f"at index {index}")
    tol = "a function of the expected value" if callable(atol) else f"atol={atol}, rtol={rtol}"
    lines.append(f"Tolerances: {tol}")
    lines.append("First mismatches (index: actual vs expected):")
    for flat in bad.reshape(-1).nonzero().reshape(-1)[:8].tolist():
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)) \
            if e.dim() else ()
        lines.append(f"  {index}: {a.reshape(-1)[flat].item()} vs {e.reshape(-1)[flat].item()}")
    if not torch.isnan(error[bad]).any():
        max_abs = float(abs_err[bad].max())
        max_rel = float(rel_err[bad].max())
        if mode == CheckValueMode.STRICT:
            lines.append(f"Suggested tolerances (STRICT, each bound alone): atol={max_abs:.3g}, "
                         f"rtol={max_rel:.3g}")
        else:
            lines.append(f"Suggested tolerances: atol={max_abs:.3g} with rtol=0, or "
                         f"rtol={max_rel:.3g} with atol=0")
    else:
        lines.append("Some mismatches are NaN against a number: no tolerance accepts them")
    return "\n".join(lines)


@contextlib.contextmanager
def open_output(path: str | None, mode: str = "w", default=None):
    """The file at ``path`` (``~`` expanded) opened in ``mode``, or ``default`` (standard output
    when None) left open when ``path`` is None or empty."""
    if not path:
        yield sys.stdout if default is None else default
        return
    with open(os.path.abspath(os.path.expanduser(path)), mode) as f:
        yield f
