"""Host speed of this build against another build of torchtpu, side by side.

A refactor of the runtime or of fused eager must not make the host slower. This benchmark runs the
same measurements with each build in turn, in fresh processes that alternate (before, after,
after, before, ...), and reports both builds' figures and their ratio, after/before:

    tiny ops      64x64 float32 `x + y`, results kept: microseconds per op over the CPU's, in
                  strict and fused eager (benchmarks/host_speed.py's tiny ops)
    fused region  host microseconds per recorded op of a cached region of 11 element-wise ops,
                  record plus flush (benchmarks/eager_modes.py, capture_cost)
    training      steps/s over the CPU's in the same round, strict and fused eager, for
                  examples/train.py's model and a small nn.TransformerEncoder (host_speed.py's
                  paired columns)

Every figure is a ratio to the CPU measured in the same process, or a host time per op; the
machine's speed, which drifts over seconds, weighs on both builds alike because the processes
alternate. The other build is a directory holding a torchtpu package with its _C module, put
first on the child's PYTHONPATH (benchmarks/zoo_time.py's docstring shows how to build one):

    python benchmarks/host_speed_ab.py --before /tmp/before            # about 6 minutes
    python benchmarks/host_speed_ab.py --before /tmp/before --rounds 2 # shorter

Writes benchmarks/results/host_speed_ab.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
FIGURES = ("add_kept_strict_over_cpu", "add_kept_fused_over_cpu", "fused_region_us_per_op",
           "example_strict_over_cpu", "example_fused_over_cpu", "encoder_strict_over_cpu",
           "encoder_fused_over_cpu")
HIGHER_IS_BETTER = {f for f in FIGURES if f.endswith("over_cpu") and not f.startswith("add")}


def measure() -> dict:
    """The figures with the torchtpu this process imports (the child's side)."""
    import host_speed
    import eager_modes
    import torchtpu

    out = {"torchtpu": torchtpu.__file__}
    ops = 200
    times = common.interleaved(host_speed.tiny_ops(ops)["add_kept"], repeats=7, warmup=2)
    per_op = {mode: common.median(t) / ops for mode, t in times.items()}
    out["add_kept_strict_over_cpu"] = per_op["strict"] / per_op["cpu"]
    out["add_kept_fused_over_cpu"] = per_op["fused"] / per_op["cpu"]
    blocks = [eager_modes.capture_cost(reps=50) for _ in range(5)]
    out["fused_region_us_per_op"] = common.median([b[0] + b[1] for b in blocks])
    for model in ("example", "encoder"):
        run = host_speed.paired_rates(model, ("cpu", "strict", "fused"), 4, 0.25)
        for column in ("strict", "fused"):
            out[f"{model}_{column}_over_cpu"] = common.median(
                [a / b for a, b in zip(run[column], run["cpu"])])
    return out


def run_child(pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], env=env,
                          capture_output=True, text=True, timeout=900, cwd=HERE)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def compare(samples: dict) -> dict:
    """Medians per build and the ratio after/before, with whether 'after' is no worse."""
    summary = {}
    for figure in FIGURES:
        before = common.median([s[figure] for s in samples["before"]])
        after = common.median([s[figure] for s in samples["after"]])
        better_when_higher = figure in HIGHER_IS_BETTER
        summary[figure] = {"before": before, "after": after, "after_over_before": after / before,
                           "higher_is_better": better_when_higher}
    return summary


def commit_of(directory: str) -> str | None:
    """The commit the other build was made from, when its directory is a git checkout."""
    proc = subprocess.run(["git", "-C", directory, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="directory holding the other build's torchtpu package")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of processes per build")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure()))
        return
    if not args.before:
        parser.error("--before DIR is required")
    samples = {"before": [], "after": []}
    for r in range(args.rounds):
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            sample = run_child(args.before if side == "before" else None)
            samples[side].append(sample)
            print(f"  round {r + 1}/{args.rounds} {side:6s} ({sample['torchtpu']}): " +
                  ", ".join(f"{f} {sample[f]:.3f}" for f in FIGURES), flush=True)
    summary = compare(samples)
    print(f"== medians of {args.rounds} processes per build; after/before (higher is better for "
          f"the training ratios, lower for the per-op figures)")
    for figure, row in summary.items():
        print(f"  {figure:26s} before {row['before']:8.3f}  after {row['after']:8.3f}  "
              f"after/before {row['after_over_before']:.3f}")
    common.write_json("host_speed_ab", {"before": args.before,
                                        "before_commit": commit_of(args.before),
                                        "rounds": args.rounds,
                                        "summary": summary, "samples": samples})


if __name__ == "__main__":
    main()
