"""``torch_tpu._internal.utils.test_utils``: TorchTPU's comparison of a tpu result with a
reference, written for torchtpu. ``assert_close`` with ``CheckValueMode`` and a mismatch report
(how many elements differ, the largest errors and where, the first values that differ, and the
tightest tolerances that would have passed: ``compute_optimal_tolerances``).

This is the one implementation; ``torch_tpu._internal.utils.utils.assert_close`` (TorchTPU's
older name) calls it and differs only in accepting an explicit ``CheckValueMode.LOOSE``."""
from __future__ import annotations

import collections.abc
import enum
import math
from typing import Any, Callable, Union

import torch

__all__ = ["CheckValueMode", "Tolerance", "assert_close", "compute_optimal_tolerances"]

# An absolute tolerance, or a function of the expected value giving it (rtol must then be None).
Tolerance = Union[float, Callable[[float], float]]

# The margin compute_optimal_tolerances puts on the errors it measured (TorchTPU's factor).
SAFETY_FACTOR = 1.2


class CheckValueMode(enum.Enum):
    """SKIP: shapes and dtypes only. LOOSE (the default): ``|actual - expected| <= atol + rtol *
    |expected|`` (torch.testing.assert_close's rule). STRICT: ``|actual - expected| <= atol`` and
    ``<= rtol * |expected|`` both, so a relative bound holds even near zero (an expected 0 needs
    an exact 0, up to 1e-7)."""

    SKIP = "skip"
    LOOSE = "loose"
    STRICT = "strict"


def assert_close(actual: Any, expected: Any, rtol: float | None = None,
                 atol: Tolerance | None = None, preamble: str | None = None,
                 check_value: CheckValueMode | None = None, check_dtype: bool = True) -> None:
    """Asserts that ``actual`` and ``expected`` (tensors, or sequences of them compared item by
    item) agree. Omitted tolerances are torch.testing's defaults for the dtype; ``atol`` may be a
    function of the expected value (then ``rtol`` must be None). ``check_value`` None means LOOSE;
    passing LOOSE explicitly is a ValueError, as in TorchTPU. ``check_dtype=False`` compares in
    the promoted dtype."""
    if check_value == CheckValueMode.LOOSE:
        raise ValueError("LOOSE mode is the default: omit the check_value argument")
    compare(actual, expected, rtol, atol, preamble, check_value or CheckValueMode.LOOSE,
            check_dtype)


def compare(actual, expected, rtol, atol, preamble, mode: CheckValueMode,
            check_dtype: bool) -> None:
    """assert_close's work, for both of TorchTPU's names (mode already resolved)."""
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
            compare(a, e, rtol, atol, preamble, mode, check_dtype)
        return
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor), (
        f"expected tensors, got {type(actual).__name__} and {type(expected).__name__}")
    _compare_tensors(actual, expected, rtol, atol, preamble or "", mode, check_dtype)


# The value of each 4-bit E2M1 code (bit 3 is the sign), for comparing float4_e2m1fn_x2 tensors.
_FP4_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
             -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _decoded(t: torch.Tensor) -> torch.Tensor:
    """Sub-byte dtypes as numbers the CPU can subtract (it has no arithmetic for them): int4 and
    uint4 one element per byte, float4_e2m1fn_x2 two values per byte, low nibble first."""
    if t.dtype == torch.int4:
        return (t.view(torch.int8) << 4) >> 4
    if t.dtype == torch.uint4:
        return t.view(torch.uint8) & 0xF
    if t.dtype == torch.float4_e2m1fn_x2:
        data = t.view(torch.uint8)
        codes = torch.stack((data & 0xF, data >> 4), dim=-1)
        if t.dim():
            codes = codes.reshape(*t.shape[:-1], 2 * t.shape[-1])
        return torch.tensor(_FP4_E2M1)[codes.long()]
    return t


def _compare_tensors(actual, expected, rtol, atol, preamble, mode, check_dtype) -> None:
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
    a = _decoded(actual.detach().cpu())
    e = _decoded(expected.detach().cpu())
    dtype = torch.promote_types(a.dtype, e.dtype)
    wide = torch.complex128 if dtype.is_complex else torch.float64
    if not callable(atol) and (rtol is None or atol is None):
        default_rtol, default_atol = torch.testing._comparison.default_tolerances(
            a.to(dtype), e.to(dtype))
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
    a, e = a.to(wide), e.to(wide)
    error = (a - e).abs()
    size = e.abs()
    nan_equal = torch.isnan(a) & torch.isnan(e)
    inf_equal = torch.isinf(a) & torch.isinf(e) & (a == e)
    if callable(atol):  # (a per-value absolute bound: the loose rule with rtol 0)
        bound = e.real.clone().apply_(lambda v: atol(v)) if e.numel() else e.real
        bad = ~(error <= bound)
    elif mode == CheckValueMode.STRICT:
        # An expected 0 against -0.0 or a denormal: the relative bound allows 1e-7 absolute.
        bad = ~((error <= atol) & (error <= torch.clamp(rtol * size, min=1e-7)))
    else:
        bad = ~(error <= atol + rtol * size)
    bad &= ~(nan_equal | inf_equal)
    count = int(bad.sum())
    if count == 0:
        return
    raise AssertionError(head + _report(a, e, error, size, bad, count, rtol, atol, mode))


def _index(flat: int, shape) -> tuple:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ()


def _report(a, e, error, size, bad, count, rtol, atol, mode) -> str:
    finite = ~torch.isnan(error)
    abs_err = torch.where(finite, error, torch.zeros_like(error))
    rel_err = torch.where(size > 0, abs_err / size.clamp_min(1e-300),
                          torch.where(abs_err > 0, torch.full_like(abs_err, math.inf), abs_err))
    lines = [f"Tensor-likes are not close! ({mode.name.lower()} check)",
             f"Mismatched elements: {count} / {e.numel()} ({100.0 * count / e.numel():.1f}%)"]
    for name, values in (("absolute", abs_err), ("relative", rel_err)):
        flat = int(values.reshape(-1).argmax())
        lines.append(f"Greatest {name} difference: {float(values.reshape(-1)[flat]):.6g} "
                     f"at index {_index(flat, e.shape)}")
    tol = "a function of the expected value" if callable(atol) else f"atol={atol}, rtol={rtol}"
    lines.append(f"Tolerances: {tol}")
    lines.append("First mismatches (index: actual vs expected):")
    for flat in bad.reshape(-1).nonzero().reshape(-1)[:8].tolist():
        lines.append(f"  {_index(flat, e.shape)}: {a.reshape(-1)[flat].item()} vs "
                     f"{e.reshape(-1)[flat].item()}")
    lines.append(_suggestion(a, e, mode))
    return "\n".join(lines)


def _suggestion(a, e, mode) -> str:
    atol, rtol = compute_optimal_tolerances(a, e)
    if math.isnan(atol) or math.isnan(rtol):
        return "Tolerance suggestions: none (a NaN stands against a number)"
    text = (f"Tolerance suggestions (the tightest pair, with a {SAFETY_FACTOR}x margin): "
            f"atol={atol:.3g}, rtol={rtol:.3g}")
    if mode == CheckValueMode.STRICT:
        text += " (they bound the loose rule; STRICT checks each bound alone)"
    return text


def _round_up(value: float) -> float:
    return math.nextafter(value, math.inf) if math.isfinite(value) and value != 0.0 else value


def compute_optimal_tolerances(actual: Any, expected: Any,
                               safety_factor: float = SAFETY_FACTOR) -> tuple[float, float]:
    """The ``(atol, rtol)`` pair with the smallest sum that passes the loose rule
    ``|a - e| <= atol + rtol * |e|``: elements with ``|e| <= 1`` set atol (their largest
    difference), the others set rtol (their largest relative difference); both times
    ``safety_factor``, rounded up. Sequences give the largest of their items' bounds; NaN against
    a number gives NaNs, an infinite difference infinities."""
    assert actual is not None and expected is not None, "both values are needed"
    if isinstance(actual, (list, tuple)) or isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (
            f"different containers: {type(actual).__name__} of {len(actual)} against "
            f"{type(expected).__name__} of {len(expected)}")
        bounds = [compute_optimal_tolerances(x, y, safety_factor)
                  for x, y in zip(actual, expected)]
        if any(math.isnan(v) for pair in bounds for v in pair):
            return math.nan, math.nan
        return (max((b[0] for b in bounds), default=0.0),
                max((b[1] for b in bounds), default=0.0))
    assert isinstance(actual, torch.Tensor) == isinstance(expected, torch.Tensor), (
        f"a {type(actual).__name__} against a {type(expected).__name__}")
    if not isinstance(actual, torch.Tensor):
        actual, expected = torch.as_tensor(actual), torch.as_tensor(expected)
    assert actual.dtype == expected.dtype, f"dtypes differ: {actual.dtype} and {expected.dtype}"
    assert actual.shape == expected.shape, f"shapes differ: {actual.shape} and {expected.shape}"
    if actual.numel() == 0:
        return 0.0, 0.0
    wide = torch.complex128 if actual.dtype.is_complex else torch.float64
    a = _decoded(actual.detach().cpu()).to(wide)
    e = _decoded(expected.detach().cpu()).to(wide)
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if (nan_a ^ nan_e).any():
        return math.nan, math.nan
    valid = ~nan_a
    if not valid.any():
        return 0.0, 0.0
    diff = (a[valid] - e[valid]).abs()
    if torch.isinf(diff).any():
        return math.inf, math.inf
    size = e[valid].abs()
    small = size <= 1.0
    atol = float(diff[small].max()) if small.any() else 0.0
    rtol = 0.0
    large = ~small & torch.isfinite(size)
    if large.any():
        rtol = float((diff[large] / size[large]).max())
    return _round_up(safety_factor * _round_up(atol)), _round_up(safety_factor * _round_up(rtol))
