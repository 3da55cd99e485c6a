"""Wall time of model-zoo items on this build against another build of torchtpu, interleaved.

The zoo sweep (scripts/zoo_sweep.sh) runs each transformers model type in its own subprocess:
Python and the libraries start, the model is built and run on the CPU once, then on "tpu" in
strict and fused eager. This benchmark runs a sample of those items (every n-th model type) with
each build in turn, alternating which goes first, and reports the seconds per item of both and
their ratio: the change of the sweep's wall time that a change of torchtpu makes, measured side by
side on one machine.

The other build is a torchtpu package directory (one with torchtpu/_C*.so), put first on the
child's PYTHONPATH; for example the commit before the host-speed work:

    git worktree add /tmp/before afe7d25 && cmake -S /tmp/before -B /tmp/before-build -G Ninja \\
        -DCMAKE_PREFIX_PATH=$(python -c 'import torch.utils;print(torch.utils.cmake_prefix_path)') \\
        -DCMAKE_BUILD_TYPE=Release -DTORCHTPU_BUILD_TESTS=OFF && cmake --build /tmp/before-build \\
        && cmake --install /tmp/before-build --prefix /tmp/before/torchtpu
    python benchmarks/zoo_time.py --before /tmp/before --every 20      # about 10 minutes
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "test" / "models" / "zoo.py"


def run_item(model_type: str, causal: bool, modes: str, pythonpath: str | None,
             probe: bool) -> tuple[float, list[dict], str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(ZOO), "--one", model_type, "--modes", modes] + (["--causal"] if causal else [])
    probe_cmd = [sys.executable, "-c", "import sys; sys.path[0] = %r; import torchtpu; print(torchtpu.__file__)"
             % str(ZOO.parent)]
    where = subprocess.run(probe_cmd, env=env, capture_output=True, text=True).stdout.strip() if probe else ""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    except subprocess.TimeoutExpired:
        rows = []
    return time.perf_counter() - start, rows or [{"status": "died or timed out"}], where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="directory holding the other build's torchtpu package")
    parser.add_argument("--every", type=int, default=20, help="every n-th model type of the zoo")
    parser.add_argument("--modes", default="strict,fused")
    args = parser.parse_args()
    sys.path.insert(0, str(ZOO.parent))
    import zoo

    types = zoo.model_types()[:: args.every]
    items = []
    sides = ("before", "after")
    parts = ["wall"] + ["cpu"] + args.modes.split(",")  # seconds: the item, its CPU reference, each mode
    totals = {side: {part: 0.0 for part in parts} for side in sides}
    for i, (model_type, causal) in enumerate(types):
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        row = {"model_type": model_type}
        for side in order:
            seconds, rows, where = run_item(model_type, causal, args.modes,
                                            args.before if side == "before" else None, i == 0)
            if i == 0:
                print(f"  {side}: torchtpu from {where}")
            row[side] = {"wall": round(seconds, 2), "statuses": [r["status"] for r in rows],
                         "cpu": rows[0].get("cpu_seconds", 0.0)}
            for r in rows:
                if "mode" in r:
                    row[side][r["mode"]] = r.get("tpu_seconds", 0.0)
        items.append(row)
        agree = row["before"]["statuses"] == row["after"]["statuses"]
        if agree:
            for side in sides:
                for part in parts:
                    totals[side][part] += row[side].get(part, 0.0)
        print(f"[{i + 1}/{len(types)}] {model_type} ({'/'.join(row['after']['statuses'])}): "
              + ", ".join(f"{side} {row[side]['wall']:.1f} s (" + " ".join(
                  f"{p} {row[side].get(p, 0.0):.1f}" for p in parts[1:]) + ")" for side in sides)
              + ("" if agree else "  (statuses differ: left out of the totals)"), flush=True)
    ratio = {part: totals["after"][part] / totals["before"][part] if totals["before"][part] else float("nan")
             for part in parts}
    print(f"\n{len(types)} of {len(zoo.model_types())} model types ({args.modes}), the items whose "
          f"statuses agree, seconds before -> after (after/before):")
    for part in parts:
        label = {"wall": "whole items", "cpu": "CPU reference"}.get(part, f"tpu {part}")
        print(f"  {label:14s} {totals['before'][part]:7.1f} -> {totals['after'][part]:7.1f}  ({ratio[part]:.2f}x)")
    common.write_json("zoo_time", {"every": args.every, "modes": args.modes, "before": args.before,
                                           "totals_s": totals,
                                           "after_over_before": ratio, "items": items})


if __name__ == "__main__":
    main()
