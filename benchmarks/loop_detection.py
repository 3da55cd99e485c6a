"""Fused eager on a training loop that reads no value until its last step, with and without loop
detection (Google TorchTPU's ``TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS``, "safe" by default: the
pending graph is cut where the recorded ops repeat, so each iteration replays one cached plan),
against the same loop reading its loss after every step.

A small ``nn.TransformerEncoder`` (d 64, 4 heads, ff 256, 2 layers; batch 16 x 64 tokens) takes
``--steps`` AdamW steps in five columns, each in its own process: PyTorch on the CPU; fused eager
with a loss read (``.item()``) after every step; fused eager reading only after the last step,
with loop detection (the default) and with it off (its graphs then cut only at the size limit,
``TORCHTPU_DEFER_MAX_OPS``); strict eager for scale. The columns alternate in ``--rounds`` rounds
(the machine's speed drifts, for every column alike), and each prints steps per second; the
figure is each column's steps/s over the CPU's in the same round (median over rounds), with the
plan cache's hits and misses and the loop-detection cuts of the fused columns.

    python benchmarks/loop_detection.py [--steps 100] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CHILD = r"""
import json, sys, time, torch, torch.nn as nn, torch.nn.functional as F
device, steps, read_each = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(16, 64, 64).to(device)
y = torch.randn(16, 64, 64).to(device)
def run(n):
    for _ in range(n):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if read_each:
            loss.item()
    return loss.item()
run(3)  # warm-up (plans, allocations)
if device == "tpu":
    import torchtpu
    torchtpu.metrics.reset()
start = time.perf_counter()
final = run(steps)
seconds = time.perf_counter() - start
out = {"steps_per_s": steps / seconds, "loss": final}
if device == "tpu":
    c = torchtpu.metrics.counters()
    out["cache_hits"] = c.get("defer.cache_hits", 0)
    out["cache_misses"] = c.get("defer.cache_misses", 0)
    out["graphs"] = c.get("defer.graphs", 0)
    out["repeated_ops_cuts"] = c.get("defer.repeated_ops_cuts", 0)
print(json.dumps(out))
"""

COLUMNS = {
    # name: (device, read each step, environment)
    "cpu": ("cpu", True, {}),
    "fused_read_each_step": ("tpu", True, {"TORCHTPU_EAGER_MODE": "fused"}),
    "fused_no_read": ("tpu", False, {"TORCHTPU_EAGER_MODE": "fused"}),
    "fused_no_read_detection_off": ("tpu", False, {"TORCHTPU_EAGER_MODE": "fused",
                                                   "TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS": "off"}),
    "strict_no_read": ("tpu", False, {"TORCHTPU_EAGER_MODE": "strict"}),
}


def run_column(name: str, steps: int) -> dict:
    device, read_each, env = COLUMNS[name]
    full = {**os.environ, **env}
    if "TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS" not in env:
        full.pop("TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS", None)  # (the default)
    out = subprocess.run([sys.executable, "-c", CHILD, device, str(steps), "1" if read_each else "0"],
                         env=full, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = []
    for r in range(args.rounds):
        names = list(COLUMNS)
        names = names[r % len(names):] + names[:r % len(names)]
        row = {name: run_column(name, args.steps) for name in names}
        rounds.append(row)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{n} {row[n]['steps_per_s']:.1f}" for n in COLUMNS), flush=True)
    over_cpu = {name: statistics.median(row[name]["steps_per_s"] / row["cpu"]["steps_per_s"]
                                        for row in rounds) for name in COLUMNS if name != "cpu"}
    cache = {name: {k: rounds[-1][name][k]
                    for k in ("cache_hits", "cache_misses", "graphs", "repeated_ops_cuts")}
             for name in COLUMNS if name.startswith("fused")}
    print("\nsteps/s over the CPU's in the same round (median of rounds):")
    for name, ratio in over_cpu.items():
        extra = f"  plan cache {cache[name]}" if name in cache else ""
        print(f"  {name:30s} {ratio:.2f}x{extra}")
    target = over_cpu["fused_no_read"] >= over_cpu["fused_read_each_step"]
    print(f"target (the no-read loop at least as fast as reading each step): "
          f"{'met' if target else 'not met'}")
    payload = {"steps": args.steps, "rounds": rounds, "over_cpu": over_cpu, "plan_cache": cache,
               "target_met": target, "machine": common.machine()}
    print(common.write_json("loop_detection", payload))

    def draw(plt):
        fig, ax = plt.subplots(figsize=(8, 3.5))
        names = list(over_cpu)
        ax.barh(names, [over_cpu[n] for n in names], color="tab:green")
        ax.axvline(1.0, color="gray", linestyle=":")
        ax.set_xlabel("training steps/s over PyTorch on the CPU (same round)")
        ax.set_title(f"nn.TransformerEncoder + AdamW, {args.steps} steps")
        fig.tight_layout()
        return fig
    common.plot("loop_detection", draw)


if __name__ == "__main__":
    main()
