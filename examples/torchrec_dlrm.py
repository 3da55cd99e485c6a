"""TorchRec on simulated TPU chips: a small DLRM sharded by DistributedModelParallel over 2 ranks,
one simulated chip each, backend "tpu_dist" (docs/torchrec.md).

    build/venv-rec/bin/python examples/torchrec_dlrm.py [--steps 8]

(TorchRec and fbgemm-gpu-cpu live in their own virtual environment, made by
``bash scripts/test_torchrec.sh``.) Four embedding tables, two sharded table-wise and two
row-wise, with TorchRec's fused rowwise Adagrad (fbgemm's table-batched embeddings, which run
on tpu as torchtpu's ``torchtpu_tbe`` kernels), and DLRM's dense MLPs trained with SGD (DDP
over "tpu_dist"). Each rank prints its loss at every step; rank 0 then prints what the cost
model charged for the embedding lookups (HBM row gathers, estimated on the simulated chip and
on v6e), the run's estimated device time, and the CPU fallbacks (0: every op of the training,
TorchRec's input distribution included, has a tpu kernel).
"""
from __future__ import annotations

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TABLES, ROWS, DIM, DENSE_IN, BATCH = 4, 1000, 16, 8, 32


def make_batch(rank: int, step: int, device):
    from torchrec import KeyedJaggedTensor

    g = torch.Generator().manual_seed(1000 * step + rank)
    lengths = torch.randint(0, 5, (TABLES * BATCH,), generator=g)
    values = torch.randint(0, ROWS, (int(lengths.sum()),), generator=g)
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=[f"f{t}" for t in range(TABLES)], values=values, lengths=lengths)
    dense = torch.randn(BATCH, DENSE_IN, generator=g)
    labels = torch.randint(0, 2, (BATCH,), generator=g).float()
    return dense.to(device), kjt.to(device), labels.to(device)


def build(device, world: int):
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.types import ParameterConstraints
    from torchrec.models.dlrm import DLRM
    from torchrec.optim import RowWiseAdagrad
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

    import torchtpu.torchrec

    tables = [EmbeddingBagConfig(name=f"t{t}", embedding_dim=DIM, num_embeddings=ROWS,
                                 feature_names=[f"f{t}"]) for t in range(TABLES)]
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(tables, device=torch.device(
        "meta")), dense_in_features=DENSE_IN, dense_arch_layer_sizes=[32, DIM],
        over_arch_layer_sizes=[32, 1], dense_device=torch.device("cpu"))
    apply_optimizer_in_backward(RowWiseAdagrad, model.sparse_arch.parameters(), {"lr": 0.05})
    kinds = ["table_wise", "table_wise", "row_wise", "row_wise"]
    constraints = {f"t{t}": ParameterConstraints(sharding_types=[k], compute_kernels=["fused"])
                   for t, k in enumerate(kinds)}
    # torchtpu.torchrec.topology: TorchRec's planner's accelerator with HBM ("cuda" to it), the
    # simulated chip's HBM; DistributedModelParallel places the plan's shards on tpu (without a
    # plan, it plans so itself).
    planner = EmbeddingShardingPlanner(topology=torchtpu.torchrec.topology(world),
                                       constraints=constraints)
    plan = planner.collective_plan(model, [EmbeddingBagCollectionSharder()],
                                   dist.GroupMember.WORLD)
    return DistributedModelParallel(model, device=device, plan=plan), plan


def run(rank: int, world: int, port: int, steps: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torchtpu
    import torchtpu.torchrec

    torch.tpu.set_device(rank)
    device = torch.device("tpu", rank)
    dist.init_process_group("tpu_dist", rank=rank, world_size=world)
    model, plan = build(device, world)
    if rank == 0:
        print(plan)
    dense_opt = torch.optim.SGD(
        [p for n, p in model.named_parameters() if "sparse_arch" not in n], lr=0.05)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    torchtpu.metrics.reset()
    for step in range(steps):
        dense, kjt, labels = make_batch(rank, step, device)
        loss = loss_fn(model(dense, kjt).squeeze(-1), labels)
        dense_opt.zero_grad()
        loss.backward()
        dense_opt.step()
        print(f"rank {rank} step {step}: loss {loss.item():.5f}", flush=True)
    dist.barrier()
    if rank == 0:
        report(torchtpu, steps)
    dist.destroy_process_group()


def report(torchtpu, steps: int) -> None:
    print(f"\nrank 0, {steps} steps: the embedding ops as the cost model charged them (estimates)")
    here = torchtpu.torchrec.embedding_costs()
    v6e = torchtpu.torchrec.embedding_costs(chip="v6e")
    print(f"{'op':30} {'launches':>8} {'HBM bytes':>12} {'simulated chip':>15} {'v6e':>10}")
    for op, c in sorted(here.items()):
        print(f"{op:30} {int(c['launches']):>8} {int(c['hbm_bytes']):>12} "
              f"{c['estimated_s'] * 1e6:>12.2f} us {v6e[op]['estimated_s'] * 1e6:>7.2f} us")
    est = torchtpu.metrics.estimate()
    print(f"whole run on the simulated {est['chip']}: {est['device_time_s'] * 1e3:.3f} ms "
          f"estimated device time, {est['launches']} launches")
    fallbacks = torchtpu.metrics.fallbacks()
    print(f"CPU fallbacks: {sum(fallbacks.values())} {fallbacks if fallbacks else ''}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(2, port, args.steps), nprocs=2)


if __name__ == "__main__":
    main()
