"""The rank processes of test_distributed_recorded.py: collectives recorded inside fused eager's
graphs (TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS=0, torchtpu.distributed's
materialize_collective_tensors(False), or an SPMD-safe region), each scenario against strict
eager and against the default cut, on the rank's chip (argv as distributed_child.py's)."""
import contextlib
import os
import sys

import torch
import torch.distributed as dist

import torchtpu
from torchtpu import distributed as tpu_dist

sys.path.insert(0, os.path.dirname(__file__))
from distributed_child import batch, run_rank, small_model  # noqa: E402

# (strict eager; fused eager cutting its graph at collectives; fused eager recording them)
VARIANTS = (("strict", True), ("fused", True), ("fused", False))


@contextlib.contextmanager
def variant(mode: str, materialize: bool):
    """Runs the block in `mode` with the collectives cut or recorded; the counters start at 0."""
    previous = tpu_dist.materialize_collective_tensors()
    tpu_dist.materialize_collective_tensors(materialize)
    torchtpu.set_eager_mode(mode)
    torchtpu.metrics.reset()
    try:
        yield
    finally:
        torchtpu.set_eager_mode("strict")
        tpu_dist.materialize_collective_tensors(previous)


def figures() -> dict:
    c = torchtpu.metrics.counters()
    by_collective = torchtpu.metrics.materializations().get("collective", {})
    return {"graphs": c.get("defer.graphs", 0),
            "materializations": c.get("defer.materializations", 0),
            "recorded": c.get("defer.collectives_recorded", 0),
            "by_collective": sum(by_collective.values()),
            "all_reduce": c.get("collectives.all_reduce", 0),
            "reduce_scatter": c.get("collectives.reduce_scatter", 0)}


def program(rank, size, dev, ops):
    """Element-wise ops around each collective of `ops` (all_reduce with each reduce op,
    all_gather_into_tensor, reduce_scatter_tensor, broadcast): one value with everything."""
    x = torch.arange(8, dtype=torch.float32, device=dev) * (rank + 1) / 7
    parts = []
    for op in ops:
        y = x.sin() * 2 + rank
        if op in ("sum", "avg", "max", "min", "product", "premul"):
            reduce = (dist._make_nccl_premul_sum(0.5) if op == "premul"
                      else getattr(dist.ReduceOp, op.upper()))
            dist.all_reduce(y, op=reduce)
        elif op == "all_gather":
            g = torch.empty(8 * size, device=dev)
            dist.all_gather_into_tensor(g, y)
            y = g.reshape(size, 8).sum(0)
        elif op == "reduce_scatter":
            r = torch.empty(8, device=dev)
            dist.reduce_scatter_tensor(r, torch.cat([y] * size) * 0.25, op=dist.ReduceOp.AVG)
            y = r
        elif op == "broadcast":
            dist.broadcast(y, src=size - 1)
        x = y.exp() * 0.5 + x
        parts.append(x.clone())
    return torch.cat(parts)


OPS = ("sum", "avg", "max", "min", "product", "premul", "all_gather", "reduce_scatter",
       "broadcast")


def values(rank, size, dev):
    """The program in each variant (its values as read by the host, bit for bit), and inside an
    SPMD-safe region (TorchTPU's decorator, from its module path) with the default cut."""
    from torch_tpu._internal.distributed import spmd_util

    out = {}
    for mode, materialize in VARIANTS:
        with variant(mode, materialize):
            out[f"{mode}-{int(materialize)}"] = program(rank, size, dev, OPS).cpu().tolist()
            out[f"{mode}-{int(materialize)}-figures"] = figures()
    with variant("fused", True):
        region = spmd_util.spmd_safe(lambda: program(rank, size, dev, OPS))
        out["spmd"] = region().cpu().tolist()
        out["spmd-figures"] = figures()
    return out


def loop(rank, size, dev, steps=6):
    """A loop of steps with collectives that reads nothing until its end (fused eager's loop
    detection cuts it at iterations), and a DDP training loop reading its losses at the end,
    counted after its first 10 steps (DDP times those with device events, each a cut)."""
    out = {}
    for mode, materialize in VARIANTS:
        name = f"loop-{mode}-{int(materialize)}"
        ddp_name = f"ddp-{mode}-{int(materialize)}"
        with variant(mode, materialize):
            w = torch.ones(8, device=dev)
            for _ in range(steps):
                w = program(rank, size, dev, ("sum", "all_gather", "reduce_scatter"))[-8:] * 0.1 + w
            out[name] = w.cpu().tolist()
            out[name + "-figures"] = figures()
        with variant(mode, materialize):
            x, y = batch()
            xs, ys = x.chunk(size)[rank].to(dev), y.chunk(size)[rank].to(dev)
            ddp = torch.nn.parallel.DistributedDataParallel(small_model().to(dev))
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            losses = []
            for i in range(10 + steps):
                if i == 10:
                    torchtpu.metrics.reset()
                loss = torch.nn.functional.mse_loss(ddp(xs), ys)
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(loss.detach())
            out[ddp_name + "-losses"] = torch.stack(losses).cpu().tolist()
            out[ddp_name] = [p.detach().cpu().tolist() for p in ddp.module.parameters()]
            out[ddp_name + "-figures"] = figures()
    return out


def fsdp2(rank, size, dev):
    """FSDP2 (fully_shard: all-gathers and reduce-scatters on streams of their own) for three
    steps in each variant."""
    from torch.distributed.fsdp import fully_shard

    out = {}
    x, y = batch()
    xs, ys = x.chunk(size)[rank].to(dev), y.chunk(size)[rank].to(dev)
    for mode, materialize in VARIANTS:
        with variant(mode, materialize):
            m = small_model().to(dev)
            for layer in m:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer)
            fully_shard(m)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
            for _ in range(3):
                torch.nn.functional.mse_loss(m(xs), ys).backward()
                opt.step()
                opt.zero_grad()
            name = f"{mode}-{int(materialize)}"
            out[name] = [p.full_tensor().detach().cpu().tolist() for p in m.parameters()]
            out[name + "-figures"] = figures()
    return out


def order(rank, size, dev):
    """Collectives run on the host (a CPU tensor's all-reduce, a barrier, an all-to-all of tpu
    tensors, which is never recorded) after recorded ones: the recorded ones reach Gloo first on
    every rank, though one rank has run its graph and the other has not."""
    out = {}
    with variant("fused", False):
        a = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(a)
        if rank == 1:
            torchtpu.sync()  # (this rank's recorded all-reduce has run; rank 0's is pending)
        cpu = torch.full((5,), 10.0 * (rank + 1))
        dist.all_reduce(cpu)
        dist.barrier()
        b = torch.full((2,), float(rank + 1), device=dev) * 3
        dist.all_reduce(b, op=dist.ReduceOp.MAX)
        t = torch.empty(size, device=dev)
        dist.all_to_all_single(t, torch.arange(float(size), device=dev) + 10 * rank)
        out["recorded"] = a.cpu().tolist()
        out["cpu"] = cpu.tolist()
        out["after_barrier"] = b.cpu().tolist()
        out["all_to_all"] = t.cpu().tolist()
        out["figures"] = figures()
    out.update(two_streams(rank, size, dev))
    return out


def two_streams(rank, size, dev):
    """Collectives recorded on two streams, each stream's worker running its own work: the first
    one's stream is kept busy by matmuls on rank 0, the second one's on rank 1, so each rank's
    workers would reach Gloo in the other order; they keep the program's."""
    busy = torch.randn(512, 512, device=dev) * 0.01
    streams = [torch.tpu.Stream(dev), torch.tpu.Stream(dev)]
    with variant("fused", False):
        x = torch.full((4,), float(rank + 1), device=dev)
        g = torch.empty(2 * size, device=dev)
        with torch.tpu.stream(streams[0]):
            for _ in range(20 if rank == 0 else 0):
                busy = busy @ busy
            dist.all_reduce(x)
        with torch.tpu.stream(streams[1]):
            for _ in range(20 if rank == 1 else 0):
                busy = busy @ busy
            dist.all_gather_into_tensor(g, torch.full((2,), float(rank), device=dev))
        torch.tpu.synchronize(dev)
        return {"two_streams": [x.cpu().tolist(), g.cpu().tolist()],
                "two_streams_recorded": figures()["recorded"]}


def mismatch(rank, size, dev):
    """Recorded collectives of tensors whose shapes differ between the ranks: each rank raises a
    ValueError at its next synchronization (the check runs with the collective), and the group
    stays usable."""
    out = {}
    with variant("fused", False):
        bad = torch.ones(4 + rank, device=dev) * 2
        dist.all_reduce(bad)
        try:
            bad.cpu()
            out["error"] = "no error"
        except ValueError as e:
            out["error"] = str(e)
        ok = torch.ones(2, device=dev) + 1
        dist.all_reduce(ok)
        out["after"] = ok.cpu().tolist()
    return out


def main():
    # (scenarios that share rank processes: each start costs seconds)
    run_rank({"eager": lambda *a: {**values(*a), **loop(*a)}, "fsdp2": fsdp2,
              "host": lambda *a: {**order(*a), **mismatch(*a)}})


if __name__ == "__main__":
    main()
