"""Data-parallel training on simulated TPU chips, one per process (docs/distributed.md).

    python -m torch.distributed.run --nproc-per-node 2 examples/train_ddp.py [--fsdp] [--steps 20]

Each process trains on its own slice of every batch: DistributedDataParallel all-reduces the
gradients over the "tpu_dist" backend (or, with --fsdp, FSDP2's fully_shard shards parameters,
gradients and optimizer state, all-gathering and reduce-scattering them). Each rank prints its
report: the loss, the collectives it ran, and the estimated step time on its chip including the
ICI time of the collectives.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

import torchtpu


def model(d: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                               torch.nn.Linear(4 * d, 4 * d), torch.nn.GELU(),
                               torch.nn.Linear(4 * d, d))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard instead of DDP")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="global batch")
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args()

    dist.init_process_group()  # torchrun's environment; the default backend of "tpu": tpu_dist
    rank, size = dist.get_rank(), dist.get_world_size()
    dev = torch.device("tpu", torch.tpu.current_device())  # tpu:LOCAL_RANK
    net = model(args.width).to(dev)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in net:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        net = fully_shard(net)
    else:
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    torch.manual_seed(1)
    target = torch.nn.Linear(args.width, args.width)  # what the network learns to imitate
    first = last = None
    for step in range(args.steps):
        x = torch.randn(args.batch, args.width)
        with torch.no_grad():
            y = target(x)
        xs, ys = x.chunk(size)[rank].to(dev), y.chunk(size)[rank].to(dev)
        if step == args.steps - 1:
            torchtpu.metrics.reset()  # the report: the last step alone
        loss = torch.nn.functional.mse_loss(net(xs), ys)
        loss.backward()
        opt.step()
        opt.zero_grad()
        value = loss.item()
        first = value if first is None else first
        last = value
    est = torchtpu.metrics.estimate()
    coll = {k.split(".", 1)[1]: v for k, v in torchtpu.metrics.counters().items()
            if k.startswith("collectives.") and not k.endswith("_bytes")}
    # One write of the whole line: the ranks share stdout, and under torchrun (unbuffered) a print()
    # writes its text and its newline separately, so two ranks' lines could run together.
    sys.stdout.write(f"[rank {rank}/{size} on {dev}, {'FSDP2' if args.fsdp else 'DDP'}] loss {first:.4f} -> "
                     f"{last:.4f}; last step: collectives {coll}, estimated on "
                     f"{est['chip']} {est['parallel_time_s'] * 1e6:.1f} us (ICI {est['ici_time_s'] * 1e6:.1f} us, "
                     f"{est['ici_hidden_s'] * 1e6:.1f} us of it hidden behind compute)\n")
    sys.stdout.flush()
    ok = last < first
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(f"rank {rank}: the loss did not decrease")


if __name__ == "__main__":
    main()
