"""Element-wise and reduction kernels of the VPU executor against PyTorch CPU eager, on
n x n float32 tensors (default 4096), interleaved in one run. Host times measured; the
estimated TPU time of one launch is printed beside them.

    python benchmarks/vpu.py                  # strict eager (the default mode)
    python benchmarks/vpu.py --mode debug     # synchronous: the kernels alone
    python benchmarks/vpu.py --size 2048 --repeats 5

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py vpu-strict vpu-debug), the host times kept.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torchtpu

import common

CASES = {
    "add": lambda x, y: x + y,
    "mul_scalar": lambda x, y: x * 1.5,
    "exp": lambda x, y: torch.exp(x),
    "gelu": lambda x, y: F.gelu(x),
    "where": lambda x, y: torch.where(x > y, x, y),
    "add_ (in place)": lambda x, y: x.add_(1e-6),
    "sum": lambda x, y: x.sum(),
    "sum(dim=1)": lambda x, y: x.sum(1),
    "mean(dim=0)": lambda x, y: x.mean(0),
    "amax(dim=1)": lambda x, y: x.amax(1),
    "var": lambda x, y: x.var(),
    "softmax(dim=1)": lambda x, y: F.softmax(x, 1),
    "layer_norm": lambda x, y: F.layer_norm(x, x.shape[-1:]),
    "cumsum(dim=1)": lambda x, y: x.cumsum(1),
}


def reprice(payload: dict, ops=None) -> dict:
    """The cost-model fields of each row (estimated_tpu_s, bound) recomputed for its op on
    size x size float32, priced for v5e (the chip the results were run on) in a dry run in the
    run's eager mode; the measured host times kept. `ops` limits it to some ops."""
    n = payload["size"]
    with torchtpu.eager_mode(payload["mode"]):
        for row in payload["rows"]:
            if ops is not None and row["op"] not in ops:
                continue
            fn = CASES[row["op"]]

            def make():
                x, y = (torch.empty(n, n, device="tpu") for _ in range(2))
                return lambda: fn(x, y)
            est = common.dry_estimate(make, payload.get("chip", "v5e"))
            row["estimated_tpu_s"], row["bound"] = est["device_time_s"], est["launches_bound_by"]
    return payload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--mode", default="strict", choices=["strict", "debug"])
    args = p.parse_args()
    torchtpu.set_eager_mode(args.mode)
    n = args.size
    torch.manual_seed(0)
    x, y = torch.randn(n, n), torch.randn(n, n)
    tx, ty = x.to("tpu"), y.to("tpu")
    print(f"{n}x{n} float32, {args.mode} eager; host ms measured (median), TPU us estimated for "
          f"{torch.tpu.get_device_properties().chip}")
    print(f"{'op':<18}{'cpu ms':>9}{'tpu ms':>9}{'tpu/cpu speed':>15}{'est. TPU us':>13}")
    rows = []
    for name, fn in CASES.items():
        t = common.interleaved({"cpu": lambda: fn(x, y), "tpu": lambda: fn(tx, ty)}, args.repeats)
        cpu_s, tpu_s = common.median(t["cpu"]), common.median(t["tpu"])
        est = common.estimate_of(lambda: fn(tx, ty))
        rows.append({"op": name, "cpu_s": cpu_s, "tpu_s": tpu_s, "ratio": cpu_s / tpu_s,
                     "estimated_tpu_s": est["device_time_s"], "bound": est["launches_bound_by"]})
        print(f"{name:<18}{cpu_s * 1e3:>9.2f}{tpu_s * 1e3:>9.2f}{cpu_s / tpu_s:>14.2f}x"
              f"{est['device_time_s'] * 1e6:>13.1f}")
    worst = min(rows, key=lambda r: r["ratio"])
    print(f"lowest ratio: {worst['op']} {worst['ratio']:.2f}x")
    common.write_json(f"vpu-{args.mode}", {
        "description": "VPU executor vs torch CPU eager, ratio = cpu_s / tpu_s (>1: tpu faster), "
                       "median of interleaved repeats",
        "size": n, "mode": args.mode, "rows": rows,
    })

    def draw(plt):
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.barh([r["op"] for r in rows], [r["ratio"] for r in rows])
        ax.axvline(0.9, color="grey", ls="--", lw=1, label="0.9x target")
        ax.set_xlabel("host speed tpu / cpu (measured)")
        ax.set_title(f"VPU executor vs CPU eager, {n}x{n} float32, {args.mode} eager")
        ax.legend()
        return fig

    common.plot(f"vpu-{args.mode}", draw)


if __name__ == "__main__":
    main()
