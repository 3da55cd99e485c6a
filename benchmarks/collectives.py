"""Collectives on "tpu_dist" against Gloo on CPU tensors, and DDP's step on the host
(docs/distributed.md; issue #13).

1. all_reduce of 1-256 MiB float32 tensors at world size 2: tpu tensors through tpu_dist and CPU
   tensors through a Gloo group, in the same processes, blocks of 5 calls alternating between
   the two, median of 5 blocks; bus bandwidth
   2 (n - 1) / n x bytes / time (target: tpu_dist >= 0.9x Gloo, no extra copies);
2. the estimated ICI time of all_reduce and all_gather against the ring formula, per chip;
3. a DDP training step's host time at 1, 2 and 4 processes.

    python benchmarks/collectives.py [--quick]

Its estimates (2.) alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py collectives), the host figures kept.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from common import plot, write_json  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank, size, port):
    import torchtpu  # noqa: F401

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.tpu.set_device(rank)
    dist.init_process_group("tpu_dist", rank=rank, world_size=size)


def _bandwidth(rank, size, port, sizes_mib, repeats, out_path):
    _init(rank, size, port)
    gloo = dist.new_group(backend="gloo")
    rows = []
    for mib in sizes_mib:
        n = mib * 2**20 // 4
        t_tpu = torch.ones(n, device=f"tpu:{rank}")
        t_cpu = torch.ones(n)
        # Blocks of back-to-back calls, the two engines alternating block by block (a barrier
        # before each block, not each call: a barrier's release skew would be timed too).
        calls = 5
        times = {"tpu_dist": [], "gloo": []}
        for _ in range(repeats + 1):
            for name, fn in (("tpu_dist", lambda: dist.all_reduce(t_tpu)),
                             ("gloo", lambda: dist.all_reduce(t_cpu, group=gloo))):
                dist.barrier(group=gloo)
                fn()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                times[name].append((time.perf_counter() - t0) / calls)
        bus = {k: 2 * (size - 1) / size * mib * 2**20 / statistics.median(v[1:])
               for k, v in times.items()}
        rows.append({"mib": mib, "tpu_dist_GBps": bus["tpu_dist"] / 1e9,
                     "gloo_GBps": bus["gloo"] / 1e9, "ratio": bus["tpu_dist"] / bus["gloo"]})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def _ddp_step(rank, size, port, steps, out_path):
    _init(rank, size, port)
    dev = torch.device("tpu", rank)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                              torch.nn.Linear(2048, 512)).to(dev)
    net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(net.parameters())
    x = torch.randn(64, 512, device=dev)
    times = []
    for _ in range(steps + 2):
        t0 = time.perf_counter()
        net(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        torch.tpu.synchronize()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"step_s": statistics.median(times[2:])}, f)
    dist.destroy_process_group()


def spawn(fn, size, *args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(fn, args=(size, free_port(), *args, out), nprocs=size)
        with open(out) as f:
            return json.load(f)


def ici_check() -> list[dict]:
    import torchtpu

    rows = []
    links = {"v4": 9e10, "v5e": 9e10, "v5p": 1.8e11, "v6e": 1.8e11, "v7": 1.8e11}
    for chip, link in links.items():
        for chips in (4, 16, 64):
            nbytes = 256 * 2**20
            wrap = chips >= (4 if chip in ("v4", "v5p", "v7") else 16)
            w = link if wrap else link / 2
            hops = chips / 2 if wrap else chips - 1
            for kind, factor in (("all_reduce", 2), ("all_gather", 1)):
                torchtpu.metrics.reset()
                torchtpu._C.charge_collective(kind, float(nbytes), chips)
                est = torchtpu.metrics.estimate(chip=chip)["ici_time_s"]
                formula = max(hops * 1e-6, factor * (chips - 1) / chips * nbytes / w)
                rows.append({"chip": chip, "chips": chips, "kind": kind, "estimate_s": est,
                             "formula_s": formula, "ratio": est / formula})
    torchtpu.metrics.reset()
    return rows


def reprice(payload: dict) -> dict:
    """The ICI estimates (2.) recomputed, the host figures (1., 3.) kept."""
    payload["ici"] = ici_check()
    return payload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    sizes = [1, 16, 64] if args.quick else [1, 4, 16, 64, 256]
    repeats = 3 if args.quick else 5
    print(f"1. all_reduce at world size 2, median of {repeats} blocks, interleaved ...", flush=True)
    bw = spawn(_bandwidth, 2, sizes, repeats)
    for r in bw:
        print(f"   {r['mib']:>4} MiB  tpu_dist {r['tpu_dist_GBps']:6.2f} GB/s  gloo (CPU) "
              f"{r['gloo_GBps']:6.2f} GB/s  ratio {r['ratio']:.2f}")
    print("2. estimated ICI time against the ring formula (256 MiB):")
    ici = ici_check()
    worst = max(abs(r["ratio"] - 1) for r in ici)
    print(f"   {len(ici)} cases (5 chips x 4/16/64 chips x all_reduce/all_gather), "
          f"largest deviation {worst:.2e}")
    print("3. DDP training step on the host (MLP 512-2048-512, batch 64 per rank):")
    ddp = {}
    for size in (1, 2) if args.quick else (1, 2, 4):
        ddp[size] = spawn(_ddp_step, size, 5)["step_s"]
        print(f"   {size} process(es): {ddp[size] * 1e3:.2f} ms per step")
    write_json("collectives" + ("_quick" if args.quick else ""),
               {"all_reduce": bw, "ici": ici, "ddp_step_s": ddp})

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([r["mib"] for r in bw], [r["tpu_dist_GBps"] for r in bw], "o-",
                label="tpu_dist (tpu tensors)")
        ax.plot([r["mib"] for r in bw], [r["gloo_GBps"] for r in bw], "s--",
                label="gloo (CPU tensors)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("all_reduce size (MiB)")
        ax.set_ylabel("host bus bandwidth (GB/s)")
        ax.set_title("all_reduce at world size 2, this host")
        ax.legend()
        fig.tight_layout()
        return fig

    plot("collectives" + ("_quick" if args.quick else ""), draw)


if __name__ == "__main__":
    main()
