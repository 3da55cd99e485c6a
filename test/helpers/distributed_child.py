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
    # PREMUL_SUM (FSDP2's gradient reduction): each input scaled by the factor, then summed
    for name, factor in (("float", 0.5), ("tensor", torch.tensor(0.25))):
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        out[f"all_reduce_premul_{name}"] = t.cpu().tolist()
    rs = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * size, device=dev) * (rank + 1),
                               op=dist._make_nccl_premul_sum(0.5))
    out["reduce_scatter_premul"] = rs.cpu().tolist()
    r = torch.full((2,), float(rank + 1), device=dev)
    dist.reduce(r, dst=0, op=dist._make_nccl_premul_sum(2.0))
    out["reduce_premul"] = r.cpu().tolist()
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
    # of different sizes per peer: rank r sends j + 1 rows to rank j
    outs = [torch.empty(rank + 1, 2, device=dev) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((j + 1, 2), float(10 * rank + j), device=dev)
                           for j in range(size)])
    out["all_to_all_uneven"] = [t.cpu().tolist() for t in outs]
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
    with torch.device(dev):  # code that names no device (torch.set_default_device)
        d = torch.ones(3)
        dist.all_reduce(d)
        out["default_device_all_reduce"] = d.cpu().tolist()
    dist.barrier()
    out["counters"] = {k: v for k, v in torchtpu.metrics.counters().items()
                       if k.startswith("collectives.")}
    out["ici_time_s"] = torchtpu.metrics.estimate()["ici_time_s"]
    return out


def training(rank, size, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
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

    ddp = torch.nn.parallel.DistributedDataParallel(small_model().to(dev))
    ddp._set_ddp_runtime_logging_sample_rate(1)  # time every step (DDP's timer for tpu)
    steps(ddp, xs, ys)
    out["ddp"] = [p.detach().cpu().tolist() for p in ddp.module.parameters()]
    logged = ddp._get_ddp_logging_data()
    out["ddp_timing_ns"] = [logged.get(k, 0) for k in ("avg_forward_compute_time",
                                                       "avg_backward_compute_time")]
    # DDP with one small bucket per parameter, and no_sync(): gradients of two micro-batches
    # accumulated locally, all-reduced once with the second.
    acc = torch.nn.parallel.DistributedDataParallel(small_model().to(dev), bucket_cap_mb=0.0005)
    opt = torch.optim.SGD(acc.parameters(), lr=0.1)
    for _ in range(3):
        first, second = xs.chunk(2), ys.chunk(2)
        with acc.no_sync():
            (torch.nn.functional.mse_loss(acc(first[0]), second[0]) / 2).backward()
        (torch.nn.functional.mse_loss(acc(first[1]), second[1]) / 2).backward()
        opt.step()
        opt.zero_grad()
    out["ddp_no_sync_buckets"] = [p.detach().cpu().tolist() for p in acc.module.parameters()]
    # compiled mode: DDP under torch.compile(backend="tpu") (Dynamo splits the graph at the
    # buckets so the all-reduces still overlap the backward pass)
    cddp = torch.nn.parallel.DistributedDataParallel(small_model().to(dev))
    steps(torch.compile(cddp, backend="tpu"), xs, ys)
    out["ddp_compiled"] = [p.detach().cpu().tolist() for p in cddp.module.parameters()]

    def fsdp2(compiled=False, **kwargs):
        m = small_model().to(dev)
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, **kwargs)
        fully_shard(m, **kwargs)
        if compiled:  # FSDP2's hooks break the graph (counted); the layers run as programs
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            cm = torch.compile(m, backend="tpu")
            for _ in range(3):
                torch.nn.functional.mse_loss(cm(xs), ys).backward()
                opt.step()
                opt.zero_grad()
        else:
            steps(m, xs, ys)
        return [p.full_tensor().detach().float().cpu().tolist() for p in m.parameters()]

    out["fsdp2"] = fsdp2()
    out["fsdp2_no_reshard"] = fsdp2(reshard_after_forward=False)
    out["fsdp2_compiled"] = fsdp2(compiled=True)
    out["fsdp2_bf16"] = fsdp2(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                              reduce_dtype=torch.float32))
    mesh = init_device_mesh("tpu", (size,))
    tp = parallelize_module(small_model().to(dev), mesh,
                            {"0": ColwiseParallel(), "2": RowwiseParallel()})
    steps(tp, x.to(dev), y.to(dev))  # tensor parallel: every rank sees the whole batch
    out["tensor_parallel"] = [p.full_tensor().detach().cpu().tolist() for p in tp.parameters()]
    # DTensor placements: Shard -> Replicate (all-gather), Partial -> Replicate (all-reduce),
    # Partial -> Shard (reduce-scatter), on the chips.
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    whole = torch.arange(4.0 * size * 3).reshape(4 * size, 3)
    sharded = distribute_tensor(whole.to(dev), mesh, [Shard(0)])
    out["dtensor_local_device"] = str(sharded.to_local().device)
    out["dtensor_local_rows"] = sharded.to_local().shape[0]
    out["dtensor_replicated"] = sharded.redistribute(mesh, [Replicate()]).to_local().cpu().tolist()
    partial = DTensor.from_local(torch.full((2 * size, 2), float(rank + 1), device=dev), mesh,
                                 [Partial()])
    out["dtensor_partial_to_replicate"] = partial.redistribute(mesh, [Replicate()]).to_local().cpu().tolist()
    out["dtensor_partial_to_shard"] = partial.redistribute(mesh, [Shard(0)]).to_local().cpu().tolist()
    out["dtensor_matmul"] = (sharded @ distribute_tensor(torch.ones(3, 2, device=dev), mesh,
                                                         [Replicate()])).full_tensor().cpu().tolist()
    return out


def checkpoint(rank, size, dev, folder):
    """FSDP2's sharded model and optimizer state saved with torch.distributed.checkpoint (each
    rank writes its shards) and loaded into a fresh sharded model, which then trains on exactly
    as the original does."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import fully_shard

    x, y = batch()
    xs, ys = x.chunk(size)[rank].to(dev), y.chunk(size)[rank].to(dev)

    def sharded():
        m = small_model().to(dev)
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(m)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-2)

    def step(m, opt):
        torch.nn.functional.mse_loss(m(xs), ys).backward()
        opt.step()
        opt.zero_grad()

    model, opt = sharded()
    for _ in range(2):
        step(model, opt)
    msd, osd = get_state_dict(model, opt)
    local = {k: v for k, v in msd.items()}
    out = {"shard_devices": sorted({str(v.to_local().device) for v in local.values()})}
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=folder)

    fresh, fresh_opt = sharded()  # different values: not trained
    fsd, fosd = get_state_dict(fresh, fresh_opt)
    state = {"model": fsd, "optim": fosd}
    dcp.load(state, checkpoint_id=folder)
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    out["loaded_equal"] = all(torch.equal(a.full_tensor().cpu(), b.full_tensor().cpu())
                              for a, b in zip(model.parameters(), fresh.parameters()))
    step(model, opt)
    step(fresh, fresh_opt)  # the optimizer state came back too: the next step is the same
    out["next_step_equal"] = all(torch.equal(a.full_tensor().cpu(), b.full_tensor().cpu())
                                 for a, b in zip(model.parameters(), fresh.parameters()))
    out["files"] = sorted(os.listdir(folder))
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


def run_rank(scenarios: dict, where: bool = True) -> None:
    """A rank process as test_distributed.run_ranks starts it (argv: scenario, rank, size, port,
    JSON path): joins the process group on its chip, runs scenarios[scenario](rank, size, device)
    and writes its results to the path, after the backend, the device and its physical chip
    (`where`). Also test_rng_state.py's rank process (without `where`: its ranks' results are
    compared whole)."""
    scenario, rank, size, port, path = sys.argv[1:6]
    rank, size = int(rank), int(size)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(size))
    # rank -> chip; a process that sees one chip (TPU_VISIBLE_CHIPS=<rank>) has it as tpu:0
    dev = torch.device("tpu", rank % torch.tpu.device_count())
    torch.tpu.set_device(dev)
    dist.init_process_group(device_id=dev)  # no backend named: the default of device "tpu"
    result = {"backend": dist.get_backend(), "device": str(dev),
              "physical_chip": torch.tpu.get_device_properties(dev).physical_chip} if where else {}
    result.update(scenarios[scenario](rank, size, dev))
    dist.destroy_process_group()
    with open(path, "w") as f:
        json.dump(result, f)


def main():
    ckpt = os.path.join(os.path.dirname(sys.argv[5]), "ckpt")
    run_rank({"collectives": collectives, "training": training, "bad_input": bad_input,
              "checkpoint": lambda *a: checkpoint(*a, ckpt)})


if __name__ == "__main__":
    main()
