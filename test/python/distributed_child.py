"""The rank processes of test_distributed.py: each runs one scenario on its own simulated chip
(rank -> tpu:rank) over the "tpu_dist" backend and writes its results as JSON."""
import json
import os
import sys

import torch
import torch.distributed as dist

import torchtpu


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batch():
    torch.manual_seed(1)
    return torch.randn(8, 16), torch.randn(8, 4)


def collectives(rank, size, dev):
    out = {}
    x = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    out["all_reduce_sum"] = x.cpu().tolist()
    for name, op in (("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX),
                     ("min", dist.ReduceOp.MIN), ("product", dist.ReduceOp.PRODUCT)):
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{name}"] = t.cpu().tolist()
    b = torch.full((3,), float(rank), device=dev)
    dist.broadcast(b, src=size - 1)
    out["broadcast"] = b.cpu().tolist()
    r = torch.full((2,), float(rank + 1), device=dev)
    dist.reduce(r, dst=0)
    out["reduce"] = r.cpu().tolist()
    g = torch.empty(2 * size, device=dev)
    dist.all_gather_into_tensor(g, torch.full((2,), float(rank), device=dev))
    out["all_gather_into_tensor"] = g.cpu().tolist()
    lst = [torch.empty(2, device=dev) for _ in range(size)]
    dist.all_gather(lst, torch.full((2,), float(rank), device=dev))
    out["all_gather"] = [t.cpu().tolist() for t in lst]
    rs = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * size, device=dev) * (rank + 1))
    out["reduce_scatter_tensor"] = rs.cpu().tolist()
    rsl = torch.empty(2, device=dev)
    dist.reduce_scatter(rsl, [torch.full((2,), float(rank + j), device=dev) for j in range(size)])
    out["reduce_scatter"] = rsl.cpu().tolist()
    a = torch.empty(size, device=dev)
    dist.all_to_all_single(a, torch.arange(float(size), device=dev) + 10 * rank)
    out["all_to_all_single"] = a.cpu().tolist()
    outs = [torch.empty(1, device=dev) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((1,), float(10 * rank + j), device=dev) for j in range(size)])
    out["all_to_all"] = [t.cpu().tolist() for t in outs]
    # send / recv around a ring
    s = torch.full((2,), float(rank), device=dev)
    rcv = torch.empty(2, device=dev)
    if rank % 2 == 0:
        dist.send(s, (rank + 1) % size)
        dist.recv(rcv, (rank - 1) % size)
    else:
        dist.recv(rcv, (rank - 1) % size)
        dist.send(s, (rank + 1) % size)
    out["ring"] = rcv.cpu().tolist()
    # async: a Work to wait for
    w = dist.all_reduce(torch.ones(2, device=dev), async_op=True)
    w.wait()
    cpu = torch.ones(2)
    dist.all_reduce(cpu)  # CPU tensors go to Gloo as they are
    out["cpu_all_reduce"] = cpu.tolist()
    dist.barrier()
    out["counters"] = {k: v for k, v in torchtpu.metrics.counters().items()
                       if k.startswith("collectives.")}
    out["ici_time_s"] = torchtpu.metrics.estimate()["ici_time_s"]
    return out


def training(rank, size, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    out = {}
    x, y = batch()
    xs, ys = x.chunk(size)[rank].to(dev), y.chunk(size)[rank].to(dev)

    def steps(m, xs, ys):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            torch.nn.functional.mse_loss(m(xs), ys).backward()
            opt.step()
            opt.zero_grad()
        return m

    ddp = steps(torch.nn.parallel.DistributedDataParallel(small_model().to(dev)), xs, ys)
    out["ddp"] = [p.detach().cpu().tolist() for p in ddp.module.parameters()]
    fsdp = small_model().to(dev)
    for layer in fsdp:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(fsdp)
    steps(fsdp, xs, ys)
    out["fsdp2"] = [p.full_tensor().detach().cpu().tolist() for p in fsdp.parameters()]
    mesh = init_device_mesh("tpu", (size,))
    tp = parallelize_module(small_model().to(dev), mesh,
                            {"0": ColwiseParallel(), "2": RowwiseParallel()})
    steps(tp, x.to(dev), y.to(dev))  # tensor parallel: every rank sees the whole batch
    out["tensor_parallel"] = [p.full_tensor().detach().cpu().tolist() for p in tp.parameters()]
    return out


def bad_input(rank, size, dev):
    """Each mistake raises a clear error on every rank, and the group stays usable."""
    out = {}
    for name, make in (("shape", lambda: torch.ones(4 + rank, device=dev)),
                       ("dtype", lambda: torch.ones(4, device=dev,
                                                    dtype=torch.float32 if rank else torch.float64))):
        try:
            dist.all_reduce(make())
            out[name] = "no error"
        except ValueError as e:
            out[name] = str(e)
    ok = torch.ones(2, device=dev)
    dist.all_reduce(ok)
    out["after"] = ok.cpu().tolist()
    try:
        dist.all_reduce(torch.ones(2, device="meta"))
        out["meta"] = "no error"
    except (ValueError, RuntimeError) as e:
        out["meta"] = str(e)
    return out


def main():
    scenario, rank, size, port, path = sys.argv[1:6]
    rank, size = int(rank), int(size)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(size))
    dev = torch.device("tpu", rank)
    torch.tpu.set_device(rank)
    dist.init_process_group(device_id=dev)  # no backend named: the default of device "tpu"
    result = {"backend": dist.get_backend()}
    scenarios = {"collectives": collectives, "training": training, "bad_input": bad_input}
    result.update(scenarios[scenario](rank, size, dev))
    dist.destroy_process_group()
    with open(path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
