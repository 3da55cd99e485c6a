"""Pallas kernels through torchtpu.pallas (docs/custom-kernels.md): host time of one call in
Pallas' TPU interpret mode against the same computation in PyTorch on the CPU (measured on this
machine), and the cost model's estimate of the call on each chip against its roofline (estimated).

The roofline of a call is max(useful FLOPs / the chip's bf16 peak, minimal HBM bytes / its HBM
bandwidth), with the minimal bytes those of the arguments and results read or written once. The
estimate counts what the kernel's grid and block specs move (a block fetched again whenever its
index changes between grid steps) and its dots on the MXU (tiles of the chip's MXU width, at
float32's passes for float32 operands), so estimate / roofline says how far the kernel's own
blocking keeps it from the roofline, and how much the count adds.

    python benchmarks/pallas_kernels.py            # writes results/pallas_kernels.json
    python benchmarks/pallas_kernels.py --quick    # smaller sizes, no JSON

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py pallas_kernels: each kernel called once, untimed), the host times kept.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import common
import torchtpu
from torchtpu import pallas

import jax  # noqa: E402  (after torchtpu: torchtpu never imports it itself)
from jax.experimental import pallas as pl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "helpers"))
from pallas_kernels import blocked_matmul, flash  # noqa: E402  (the tests' kernels)

CHIPS = ("v4", "v5e", "v5p", "v6e", "v7")


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x: jax.Array, y: jax.Array) -> jax.Array:
    rows = 256
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // rows,), in_specs=[spec, spec],
                          out_specs=spec)(x, y)


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def cases(quick: bool):
    n = 512 if quick else 1024
    s = 512 if quick else 1024
    torch.manual_seed(0)
    x, y = torch.randn(n, n).bfloat16(), torch.randn(n, n).bfloat16()
    out = []
    for block in (128, 512):
        op = pallas.jax_op(f"bench::matmul_b{block}",
                           functools.partial(blocked_matmul, block=block))
        out.append(dict(
            name=f"blocked matmul {n}^3 bf16->f32, blocks {block}", op=op, args=(x, y),
            torch=lambda: x.float() @ y.float(), flops=2 * n ** 3,
            bytes=_nbytes(x, y) + n * n * 4))
    a, b = torch.randn(4096, 1024), torch.randn(4096, 1024)
    out.append(dict(name="element-wise add 4096x1024 f32, blocks 256 rows",
                    op=pallas.jax_op("bench::add", add), args=(a, b), torch=lambda: a + b,
                    flops=0, bytes=3 * _nbytes(a)))
    B, H, D = 1, 4, 128
    q, k, v = (torch.randn(B, H, s, D).bfloat16() for _ in range(3))
    scale = D ** -0.5
    fop = pallas.jax_op("bench::flash", flash)
    out.append(dict(name=f"flash attention fwd B{B} H{H} S{s} D{D} bf16 (JAX's Pallas kernel)",
                    op=lambda *t: fop(*t, scale), args=(q, k, v),
                    kernel_op=lambda a, b, c: flash(a, b, c, scale),
                    torch=lambda: F.scaled_dot_product_attention(q, k, v, scale=scale),
                    flops=4 * B * H * s * s * D, bytes=4 * _nbytes(q)))
    return out


def chip_estimates(case, dev):
    """The estimate of one call of the case's kernel on each chip, against its roofline."""
    chips = {c["name"]: c for c in torchtpu._C.all_chips()}
    torchtpu.metrics.reset()
    case["op"](*dev)
    per_chip = {}
    for chip in CHIPS:
        est = torchtpu.metrics.estimate(chip=chip)
        spec = chips[chip]
        roofline = max(case["flops"] / spec["bf16_flops"],
                       case["bytes"] / spec["hbm_bytes_per_s"])
        kernel_only = est["device_time_s"] - est["launch_time_s"]
        per_chip[chip] = {
            "estimate_s": est["device_time_s"], "estimate_without_launch_s": kernel_only,
            "roofline_s": roofline, "estimate_over_roofline": kernel_only / roofline,
            "bound": est["bottleneck"], "hbm_bytes": est["hbm_bytes"],
            "mxu_flops": est["mxu_flops"]}
    return per_chip


def reprice(payload):
    """The estimates per chip of each kernel recomputed (the kernel called as main() calls it
    before its estimate: a warm call, then the priced one), the host times kept."""
    by_name = {case["name"]: case for case in cases(False)}
    for row in payload["rows"]:
        case = by_name[row["kernel"]]
        dev = [t.tpu() for t in case["args"]]
        case["op"](*dev)
        torch.tpu.synchronize()
        row["chips"] = chip_estimates(case, dev)
    return payload


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for case in cases(args.quick):
        dev = [t.tpu() for t in case["args"]]
        case["op"](*dev)  # (warm-up: tracing, XLA compilation of the interpreter)
        torch.tpu.synchronize()
        kernel_s, torch_s = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            case["op"](*dev)
            torch.tpu.synchronize()
            kernel_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            case["torch"]()
            torch_s.append(time.perf_counter() - start)
        per_chip = chip_estimates(case, dev)
        work = pallas.kernel_work(case.get("kernel_op", case["op"]), *case["args"])
        row = {"kernel": case["name"], "counted": {k: work[k] for k in (
                   "flops", "vpu_units", "hbm_bytes", "grid_steps", "vmem_bytes", "notes")},
               # (the kernel author's own figures, pallas_call's cost_estimate, where it has one)
               "declared_by_kernel": work["declared"], "host_interpret_s": common.median(kernel_s),
               "host_pytorch_cpu_s": common.median(torch_s),
               "interpret_over_pytorch": common.median(kernel_s) / common.median(torch_s),
               "useful_flops": case["flops"], "minimal_bytes": case["bytes"], "chips": per_chip}
        rows.append(row)
        v5e = per_chip["v5e"]
        print(f"{case['name']}\n  host: interpret mode {row['host_interpret_s'] * 1e3:.1f} ms, "
              f"PyTorch CPU {row['host_pytorch_cpu_s'] * 1e3:.2f} ms "
              f"(x{row['interpret_over_pytorch']:.0f}); estimated on v5e "
              f"{v5e['estimate_s'] * 1e6:.1f} us ({v5e['bound']}-bound), roofline "
              f"{v5e['roofline_s'] * 1e6:.1f} us, estimate/roofline "
              f"{v5e['estimate_over_roofline']:.2f}; HBM bytes counted "
              f"{v5e['hbm_bytes'] / 2**20:.1f} MiB vs minimal {case['bytes'] / 2**20:.1f} MiB")
    if not args.quick:
        common.write_json("pallas_kernels", {
            "what": "host time of a Pallas kernel call in TPU interpret mode (measured) vs "
                    "PyTorch CPU; estimated TPU time (cost model, from the grid and block specs) "
                    "vs the roofline, per chip",
            "rows": rows})


if __name__ == "__main__":
    main()
