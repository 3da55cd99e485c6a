"""GEMM throughput of the simulated MXU ("tpu") against PyTorch's CPU GEMM, side by side.

For square sizes 512..4096: float32 at each precision level ("highest" = 6 bf16 passes,
"high" = 3, "medium" = 1; docs/precision.md), "highest" with the float32 opt-in (the host's
float32 GEMM: torch.tpu.set_highest_algorithm("float32")), and bfloat16. The CPU side runs at the
same torch.set_float32_matmul_precision, so both sides are asked the same question; for "high"
and "medium" the comparison against CPU float32 at "highest" is printed too.

    python benchmarks/gemm.py                 # full: 512, 1024, 2048, 4096
    python benchmarks/gemm.py --sizes 512 1024 --repeats 3

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py gemm), the host times kept.
"""
from __future__ import annotations

import argparse

import torch
import torchtpu  # noqa: F401

import common


def gflops(n: int, seconds: float) -> float:
    return 2 * n**3 / seconds / 1e9


def estimate_one(n: int, dtype: str, precision: str, opt_in: bool) -> float:
    """The estimated v5e time of one n x n GEMM in `dtype` at `precision`, priced in a dry
    run."""
    dt = getattr(torch, dtype.removeprefix("torch."))
    previous = torch.get_float32_matmul_precision(), torch.tpu.get_highest_algorithm()
    torch.set_float32_matmul_precision(precision)
    torch.tpu.set_highest_algorithm("float32" if opt_in else "bf16_6x")
    try:
        def make():
            a, b = (torch.empty(n, n, dtype=dt, device="tpu") for _ in range(2))
            return lambda: a @ b
        return common.dry_estimate(make, "v5e")["device_time_s"]
    finally:
        torch.set_float32_matmul_precision(previous[0])
        torch.tpu.set_highest_algorithm(previous[1])


def reprice(payload: dict, sizes=None) -> dict:
    """The cost-model field of each row (estimated_v5e_s) recomputed for its GEMM, the measured
    host times kept; `sizes` limits it to some n."""
    for row in payload["rows"]:
        if sizes is None or row["n"] in sizes:
            row["estimated_v5e_s"] = estimate_one(row["n"], row["dtype"], row["precision"],
                                                  "opt-in" in row["case"])
    return payload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    rows = []
    print(f"{'case':<34}{'n':>6}{'cpu GFLOP/s':>14}{'tpu GFLOP/s':>14}{'tpu/cpu':>9}{'est. v5e ms':>13}")
    for n in args.sizes:
        repeats = max(2, args.repeats if n <= 2048 else args.repeats // 2)
        torch.manual_seed(0)
        a32, b32 = torch.randn(n, n), torch.randn(n, n)
        cases = [("float32 highest", "highest", torch.float32),
                 ("float32 highest, float32 opt-in", "highest", torch.float32),
                 ("float32 high", "high", torch.float32),
                 ("float32 medium", "medium", torch.float32), ("bfloat16", "highest", torch.bfloat16)]
        cpu_f32_highest = None
        for label, level, dtype in cases:
            torch.set_float32_matmul_precision(level)
            torch.tpu.set_highest_algorithm("float32" if "opt-in" in label else "bf16_6x")
            a, b = a32.to(dtype), b32.to(dtype)
            ta, tb = a.to("tpu"), b.to("tpu")
            t = common.interleaved({"cpu": lambda: a @ b, "tpu": lambda: ta @ tb}, repeats)
            cpu_s, tpu_s = common.median(t["cpu"]), common.median(t["tpu"])
            est = common.estimate_of(lambda: ta @ tb)
            if label == "float32 highest":
                cpu_f32_highest = cpu_s
            row = {"case": label, "n": n, "dtype": str(dtype), "precision": level,
                   "cpu_s": cpu_s, "tpu_s": tpu_s, "cpu_gflops": gflops(n, cpu_s),
                   "tpu_gflops": gflops(n, tpu_s), "ratio": cpu_s / tpu_s,
                   "ratio_vs_cpu_float32_highest": cpu_f32_highest / tpu_s if cpu_f32_highest else None,
                   "estimated_v5e_s": est["device_time_s"], "repeats": repeats}
            rows.append(row)
            print(f"{label:<34}{n:>6}{row['cpu_gflops']:>14.1f}{row['tpu_gflops']:>14.1f}"
                  f"{row['ratio']:>8.2f}x{est['device_time_s'] * 1e3:>13.3f}")
        torch.set_float32_matmul_precision("highest")

    common.write_json("gemm", {
        "description": "GEMM throughput, tpu (simulated MXU executor) vs torch CPU, ratio = cpu_s / tpu_s "
                       "(>1 means tpu faster); host times measured, TPU times estimated for v5e",
        "rows": rows,
    })

    def draw(plt):
        fig, ax = plt.subplots(figsize=(7, 4))
        for label in dict.fromkeys(r["case"] for r in rows):
            pts = [r for r in rows if r["case"] == label]
            ax.plot([r["n"] for r in pts], [r["ratio"] for r in pts], marker="o", label=label)
        ax.axhline(0.9, color="grey", ls="--", lw=1, label="0.9x target")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n (square GEMM)")
        ax.set_ylabel("throughput tpu / cpu (measured)")
        ax.set_title("Simulated MXU executor vs torch CPU GEMM")
        ax.legend(fontsize=8)
        return fig

    common.plot("gemm", draw)


if __name__ == "__main__":
    main()
