"""The seed microbenchmarks: A + B, A @ B and relu(A @ B + C) on n x n float32, repeated
50, 100, 150 and 200 times, on "tpu" against PyTorch CPU eager, at each float32 matmul
precision level, with the cost model's estimated TPU time beside the host time.

Each repetition count is a checkpoint of one interleaved run (cpu op, tpu op, cpu op, ...):
the time to reach 50, 100, 150 and 200 repetitions on each side. Host times are measured;
TPU times are estimated for the simulated chip (TORCHTPU_CHIP, default v5e).

    python benchmarks/seed.py                       # the full benchmark: n = 4096 (about 40 min)
    python benchmarks/seed.py --size 2048 --reps 5 10 15 20

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py seed), the host times kept.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
import torchtpu  # noqa: F401

import common


def run(label, cpu_fn, tpu_fn, reps, est_one):
    checkpoints = sorted(reps)
    cpu_t = tpu_t = 0.0
    rows = []
    cpu_fn(), tpu_fn(), common.sync()  # warm-up
    done = 0
    for target in checkpoints:
        while done < target:
            start = time.perf_counter()
            cpu_fn()
            cpu_t += time.perf_counter() - start
            start = time.perf_counter()
            tpu_fn()
            common.sync()
            tpu_t += time.perf_counter() - start
            done += 1
        rows.append({"case": label, "reps": target, "cpu_s": cpu_t, "tpu_s": tpu_t,
                     "ratio": cpu_t / tpu_t, "estimated_tpu_s": est_one * target})
        print(f"{label:<34}{target:>6}{cpu_t:>11.3f}{tpu_t:>11.3f}{cpu_t / tpu_t:>9.2f}x"
              f"{est_one * target * 1e3:>14.3f}")
    return rows


# Each case's call on the device tensors A, B, C and its float32 matmul precision.
CASES = {"A + B": (lambda A, B, C: A + B, "highest")}
for _level in ("highest", "high", "medium"):
    CASES[f"A @ B [{_level}]"] = (lambda A, B, C: A @ B, _level)
    CASES[f"relu(A @ B + C) [{_level}]"] = (lambda A, B, C: F.relu(A @ B + C), _level)


def estimate_one(case: str, n: int, chip: str) -> float:
    """The estimated time on `chip` of one repetition of `case` on n x n float32, priced in a
    dry run."""
    fn, level = CASES[case]
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(level)
    try:
        def make():
            A, B, C = (torch.empty(n, n, device="tpu") for _ in range(3))
            return lambda: fn(A, B, C)
        return common.dry_estimate(make, chip)["device_time_s"]
    finally:
        torch.set_float32_matmul_precision(previous)


def reprice(payload: dict) -> dict:
    """estimated_tpu_s of each row (one repetition's estimate times its repetitions) recomputed,
    the measured host times kept."""
    one = {case: estimate_one(case, payload["size"], payload["chip"]) for case in CASES}
    for row in payload["rows"]:
        row["estimated_tpu_s"] = one[row["case"]] * row["reps"]
    return payload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--reps", type=int, nargs="+", default=[50, 100, 150, 200])
    args = p.parse_args()
    n = args.size
    torch.manual_seed(0)
    A, B, C = torch.randn(n, n), torch.randn(n, n), torch.randn(n, n)
    tA, tB, tC = A.to("tpu"), B.to("tpu"), C.to("tpu")
    chip = torch.tpu.get_device_properties().chip
    print(f"n = {n}, float32; host seconds measured on this machine, TPU ms estimated for {chip}")
    print(f"{'case':<34}{'reps':>6}{'cpu s':>11}{'tpu s':>11}{'cpu/tpu':>10}{'est. TPU ms':>14}")
    rows = []
    est = common.estimate_of(lambda: tA + tB)["device_time_s"]
    rows += run("A + B", lambda: A + B, lambda: tA + tB, args.reps, est)
    for level in ("highest", "high", "medium"):
        torch.set_float32_matmul_precision(level)
        est = common.estimate_of(lambda: tA @ tB)["device_time_s"]
        rows += run(f"A @ B [{level}]", lambda: A @ B, lambda: tA @ tB, args.reps, est)
        est = common.estimate_of(lambda: F.relu(tA @ tB + tC))["device_time_s"]
        rows += run(f"relu(A @ B + C) [{level}]", lambda: F.relu(A @ B + C),
                    lambda: F.relu(tA @ tB + tC), args.reps, est)
    torch.set_float32_matmul_precision("highest")
    common.write_json("seed", {
        "description": "seed microbenchmarks: cumulative host seconds for N repetitions, cpu vs tpu "
                       "(strict eager), ratio = cpu_s / tpu_s; estimated_tpu_s from the cost model",
        "size": n, "chip": chip, "rows": rows,
    })

    def draw(plt):
        fig, ax = plt.subplots(figsize=(8, 4))
        for label in dict.fromkeys(r["case"] for r in rows):
            pts = [r for r in rows if r["case"] == label]
            ax.plot([r["reps"] for r in pts], [r["ratio"] for r in pts], marker="o", label=label)
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        ax.set_xlabel("repetitions")
        ax.set_ylabel("host speed tpu / cpu (measured)")
        ax.set_title(f"Seed microbenchmarks, {n}x{n} float32")
        ax.legend(fontsize=7)
        return fig

    common.plot("seed", draw)


if __name__ == "__main__":
    main()
