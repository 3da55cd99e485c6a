"""``torch_tpu._internal.utils.benchmarking``: TorchTPU's helpers for reporting a benchmark's
measurements (step times, latencies, losses) to TensorBoard as summary statistics, and for
checking one statistic against a baseline. Plain Python over ``torch.utils.tensorboard``
(needs the ``tensorboard`` package; scripts/setup.sh installs it).

Each metric has a profile (name, unit, statistics); a statistic is written under the tag
``<name>/<statistic>_<unit>``, e.g. ``Training/StepTime/P90_s``."""
from __future__ import annotations

import enum
import operator
from typing import Dict, List, TypedDict

import numpy as np

__all__ = ["METRIC_PROFILES", "Comparison", "ProfileData", "Stat", "SummaryWriter",
           "assert_metric_within_threshold", "compute_stats", "construct_metric_tag",
           "record_tensorboard_metrics"]


def __getattr__(name):
    # TensorBoard's writer is imported when asked for: the module imports without tensorboard.
    if name == "SummaryWriter":
        from torch.utils.tensorboard import SummaryWriter
        return SummaryWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Stat(enum.Enum):
    MEAN = "Mean"
    MEDIAN = "Median_p50"
    P90 = "P90"
    P95 = "P95"
    P99 = "P99"
    STDDEV = "StdDev"
    VALUE = "Value"  # (each raw measurement, its index as the step)


class Comparison(enum.Enum):
    LESS = "LESS"  # the statistic must stay below the baseline plus the threshold
    GREATER = "GREATER"  # ... above the baseline minus the threshold


class ProfileData(TypedDict):
    name: str  # the tag's base, e.g. "Inference/Latency"
    unit: str  # the tag's suffix, e.g. "ms"
    stats: List[Stat]  # the statistics written for it


_SUMMARY = [Stat.MEAN, Stat.MEDIAN, Stat.P90, Stat.P95, Stat.P99, Stat.STDDEV]


def _profiles(*rows: tuple) -> Dict[str, ProfileData]:
    table: Dict[str, ProfileData] = {}
    for name, unit, stats in rows:
        if name in table:
            raise ValueError(f"two metric profiles are named {name!r}")
        table[name] = ProfileData(name=name, unit=unit, stats=list(stats))
    return table


# The metrics TorchTPU's benchmarks and examples report.
METRIC_PROFILES: Dict[str, ProfileData] = _profiles(
    ("Compilation/Conv5D", "s", _SUMMARY),
    ("Compilation/DepChain", "s", _SUMMARY),
    ("Compilation/Randint_Float32_fast", "s", _SUMMARY),
    ("Compilation/Randint_Float32_power_of_two", "s", _SUMMARY),
    ("Compilation/Randint_Float32_slow", "s", _SUMMARY),
    ("Compilation/Sort_Float32", "s", _SUMMARY),
    ("Compilation/Take_Float32", "s", _SUMMARY),
    ("Inference/Latency", "ms", _SUMMARY),
    ("Inference/PreheatLatency", "ms", [Stat.VALUE]),
    ("Training/PreheatOverhead", "s", _SUMMARY),
    ("Training/PreheatStepTime", "s", _SUMMARY),
    ("Training/StepTime", "s", _SUMMARY),
    ("Training/ValidationLoss", "loss", [Stat.VALUE]),
)

_STATISTICS = {
    Stat.MEAN: np.mean,
    Stat.MEDIAN: np.median,
    Stat.P90: lambda v: np.percentile(v, 90),
    Stat.P95: lambda v: np.percentile(v, 95),
    Stat.P99: lambda v: np.percentile(v, 99),
    Stat.STDDEV: np.std,
}


def compute_stats(metrics: List[float], stats_to_compute: List[Stat]) -> Dict[Stat, float]:
    """Each asked-for summary statistic of the measurements (``Stat.VALUE`` is not a summary
    and is left out)."""
    return {stat: float(_STATISTICS[stat](metrics)) for stat in stats_to_compute
            if stat in _STATISTICS}


def construct_metric_tag(metric_profile: ProfileData, stat: Stat) -> str:
    """``<name>/<statistic>_<unit>``: the TensorBoard tag of one statistic of a metric."""
    return f"{metric_profile['name']}/{stat.value}_{metric_profile['unit']}"


def record_tensorboard_metrics(writer, metric_profile: ProfileData, metrics: List[float],
                               record_step_metrics: bool = True) -> None:
    """Writes the profile's statistics of ``metrics`` with ``writer`` (a TensorBoard
    ``SummaryWriter``), and each raw measurement under the VALUE tag when
    ``record_step_metrics``."""
    if record_step_metrics:
        tag = construct_metric_tag(metric_profile, Stat.VALUE)
        for step, value in enumerate(metrics):
            writer.add_scalar(tag, value, step)
    for stat, value in compute_stats(metrics, metric_profile.get("stats", [])).items():
        writer.add_scalar(construct_metric_tag(metric_profile, stat), value)


def assert_metric_within_threshold(metrics: List[float], metric_profile: ProfileData,
                                   stat_to_check: Stat, baseline: float,
                                   threshold_percent: float, comparison: Comparison) -> None:
    """Asserts that a statistic of ``metrics`` is below (LESS) ``baseline`` raised by
    ``threshold_percent`` %, or above (GREATER) it lowered by that much."""
    value = compute_stats(metrics, [stat_to_check])[stat_to_check]
    factor = threshold_percent / 100.0
    limit = baseline * (1 + factor if comparison is Comparison.LESS else 1 - factor)
    holds = {Comparison.LESS: operator.lt, Comparison.GREATER: operator.gt}[comparison]
    assert holds(value, limit), (
        f"benchmark regression in {metric_profile['name']!r} ({stat_to_check.name}): "
        f"{value:.4f} is not {comparison.name} than {limit:.4f} (baseline {baseline:.4f}, "
        f"threshold {threshold_percent}%)")
