"""Shared helpers of the benchmarks: side-by-side timing, JSON results, plots.

Every figure a benchmark prints is a ratio of two timings taken in the same run, interleaved
(A, B, A, B, ...) so that a noisy machine slows both sides alike. Host times are *measured on
this machine*; TPU times are *estimated* by torchtpu's cost model for the simulated chip.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def sync() -> None:
    torch.tpu.synchronize()


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Runs each function `repeats` times, interleaved, and returns the seconds of each call."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
            sync()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def machine() -> dict:
    """The machine and the run's date and commit, recorded in every result (benchmarks/readme.py
    prints them beside the figures)."""
    info = {
        "date": datetime.date.today().isoformat(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        model = [l for l in open("/proc/cpuinfo") if l.startswith("model name")]
        info["cpu"] = model[0].split(":", 1)[1].strip() if model else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True, cwd=RESULTS.parent).stdout.strip()
    except OSError:
        pass
    return info


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": machine(), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return path


def plot(name: str, draw: Callable) -> Path | None:
    """Draws with matplotlib into results/<name>.png, if matplotlib is installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    fig = draw(plt)
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {path}")
    return path


def estimate_of(fn: Callable[[], object], chip: str | None = None) -> dict:
    """Runs fn once with fresh metrics and returns the cost model's estimate of its launches (for
    `chip`, by default the simulated one)."""
    import torchtpu

    sync()
    torchtpu.metrics.reset()
    fn()
    sync()
    return torchtpu.metrics.estimate(chip=chip)


def dry_estimate(make: Callable[[], Callable[[], object]], chip: str | None = None) -> dict:
    """The cost model's estimate of one call, priced in a dry run (tensors without values:
    docs/insight.md, "Dry runs"): ``make()`` builds the device tensors and returns the call.
    Charged exactly what the call with values charges in strict eager, without its host work, so
    a benchmark's estimates can be recomputed without rerunning it (benchmarks/reprice.py)."""
    import torchtpu

    with torchtpu.dry_run():
        fn = make()
        return estimate_of(fn, chip)
