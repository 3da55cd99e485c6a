"""Trains TorchRec's DLRM sharded by DistributedModelParallel on 2 ranks (mp.spawn), on "tpu"
(backend "tpu_dist", one simulated chip per rank) or on the CPU (Gloo), and writes what the tests
compare (test_torchrec_dmp.py): each rank's loss at every step, the trained embedding tables
(assembled from every rank's shards) and dense parameters, and on tpu the CPU fallbacks and the
cost model's charges of the embedding ops.

    python run_dlrm.py --device tpu --optimizer rowwise_adagrad --sharding tw --out r.json
"""
import argparse
import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TABLES = 4        # four features, one table each, of ROWS x DIM
ROWS, DIM = 40, 8
DENSE_IN = 6
BATCH = 8         # per rank
# The sharding of each table: tw table-wise and column-wise (what the CPU also shards),
# rw two tables row-wise (TorchRec offers row-wise sharding on accelerators only), dp two tables
# data-parallel (replicated on every rank, fbgemm's dense kernel, their gradients all-reduced).
SHARDINGS = {"tw": ["table_wise", "table_wise", "column_wise", "table_wise"],
             "rw": ["row_wise", "table_wise", "row_wise", "column_wise"],
             "dp": ["data_parallel", "table_wise", "data_parallel", "column_wise"]}


def batch(rank, step, weighted, device):
    """Rank `rank`'s batch of step `step`, the same on every device (a generator per call)."""
    from torchrec import KeyedJaggedTensor

    g = torch.Generator().manual_seed(1000 * step + rank)
    lengths = torch.randint(0, 4, (TABLES * BATCH,), generator=g)
    values = torch.randint(0, ROWS, (int(lengths.sum()),), generator=g)
    weights = torch.rand(values.shape, generator=g) if weighted else None
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=[f"f{t}" for t in range(TABLES)], values=values, lengths=lengths, weights=weights)
    dense = torch.randn(BATCH, DENSE_IN, generator=g)
    labels = torch.randint(0, 2, (BATCH,), generator=g).float()
    return dense.to(device), kjt.to(device), labels.to(device)


def initial_tables():
    g = torch.Generator().manual_seed(7)
    return {f"t{t}": torch.randn(ROWS, DIM, generator=g) * 0.5 for t in range(TABLES)}


def build(args, device, world):
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
    from torchrec.distributed.planner.types import ParameterConstraints
    from torchrec.models.dlrm import DLRM
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

    tables = [EmbeddingBagConfig(name=f"t{t}", embedding_dim=DIM, num_embeddings=ROWS,
                                 feature_names=[f"f{t}"]) for t in range(TABLES)]
    torch.manual_seed(0)  # (the dense layers: the same on every device and rank)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(
        tables, is_weighted=args.weighted, device=torch.device("meta")), dense_in_features=DENSE_IN, dense_arch_layer_sizes=[16, DIM],
        over_arch_layer_sizes=[16, 1], dense_device=torch.device("cpu"))
    optimizer = {"sgd": torch.optim.SGD, "rowwise_adagrad": _rowwise_adagrad(),
                 "adam": torch.optim.Adam}[args.optimizer]
    hyper = {"lr": 0.05} if args.optimizer != "adam" else {"lr": 0.01, "eps": 1e-8}
    apply_optimizer_in_backward(optimizer, model.sparse_arch.parameters(), hyper)
    if args.sharding == "auto":  # (DistributedModelParallel plans: on tpu, torchtpu's planning)
        return DistributedModelParallel(model, device=device)
    constraints = {f"t{t}": ParameterConstraints(
        sharding_types=[kind], compute_kernels=["dense" if kind == "data_parallel" else "fused"])
        for t, kind in enumerate(SHARDINGS[args.sharding])}
    # (TorchRec's planner calls an accelerator with HBM "cuda"; torchtpu places its shards on tpu)
    topology = Topology(world_size=world, compute_device="cpu" if device.type == "cpu" else "cuda")
    plan = EmbeddingShardingPlanner(topology=topology, constraints=constraints).collective_plan(
        model, [EmbeddingBagCollectionSharder()], dist.GroupMember.WORLD)
    return DistributedModelParallel(model, device=device, plan=plan)


def build_sequence(args, device, world):
    """An EmbeddingCollection (sequence embeddings: one row per index, fbgemm's pooling "none")
    of the same tables, sharded as `args.sharding` says (data-parallel excepted)."""
    from torchrec import EmbeddingCollection, EmbeddingConfig
    from torchrec.distributed.embedding import EmbeddingCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
    from torchrec.distributed.planner.types import ParameterConstraints
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

    tables = [EmbeddingConfig(name=f"t{t}", embedding_dim=DIM, num_embeddings=ROWS,
                              feature_names=[f"f{t}"]) for t in range(TABLES)]
    model = EmbeddingCollection(tables=tables, device=torch.device("meta"))
    apply_optimizer_in_backward({"sgd": torch.optim.SGD, "rowwise_adagrad": _rowwise_adagrad(),
                                 "adam": torch.optim.Adam}[args.optimizer], model.parameters(),
                                {"lr": 0.05})
    constraints = {f"t{t}": ParameterConstraints(sharding_types=[kind], compute_kernels=["fused"])
                   for t, kind in enumerate(SHARDINGS[args.sharding])}
    topology = Topology(world_size=world, compute_device="cpu" if device.type == "cpu" else "cuda")
    sharders = [EmbeddingCollectionSharder()]
    plan = EmbeddingShardingPlanner(topology=topology, constraints=constraints).collective_plan(
        model, sharders, dist.GroupMember.WORLD)
    return DistributedModelParallel(model, device=device, plan=plan, sharders=sharders)


def sequence_loss(out):
    """A loss over every looked-up row of every feature (each feature pulled to its own target)."""
    return sum(((out[f"f{t}"].values() - 0.1 * (t + 1)) ** 2).sum()
               for t in range(TABLES)) / BATCH


def _rowwise_adagrad():
    from torchrec.optim import RowWiseAdagrad

    return RowWiseAdagrad


def _tables_of(model):
    """(table, [(row, col), tensor] of each shard this rank holds): sharded tables' local shards,
    a data-parallel table's whole replica."""
    for name, value in model.state_dict().items():
        if not name.endswith(".weight") or not name.split(".")[-2].startswith("t"):
            continue
        table = name.split(".")[-2]
        if hasattr(value, "local_shards"):
            yield table, [(shard.metadata.shard_offsets, shard.tensor)
                          for shard in value.local_shards()]
        elif "embedding_bags" in name:
            yield table, [((0, 0), value)]


def load_tables(model, tables):
    """Sets every shard of every table from the full tables."""
    with torch.no_grad():
        for table, shards in _tables_of(model):
            for (r, c), t in shards:
                t.copy_(tables[table][r:r + t.shape[0], c:c + t.shape[1]])


def local_shards(model):
    return [(table, offsets, t.detach().cpu().clone())
            for table, shards in _tables_of(model) for offsets, t in shards]


def run(rank, args, world, port, tmp):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torchtpu
    import torchtpu.torchrec

    if args.device == "tpu":
        torch.tpu.set_device(rank)
        device = torch.device("tpu", rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("tpu_dist" if args.device == "tpu" else "gloo", rank=rank,
                            world_size=world)
    sequence = args.model == "sequence"
    model = (build_sequence if sequence else build)(args, device, world)
    load_tables(model, initial_tables())
    dense_params = [p for n, p in model.named_parameters() if "sparse_arch" not in n]
    dense_opt = torch.optim.SGD(dense_params, lr=0.05) if not sequence else None
    loss_fn = torch.nn.BCEWithLogitsLoss()
    torchtpu.metrics.reset()
    losses = []
    for step in range(args.steps):
        dense, kjt, labels = batch(rank, step, args.weighted, device)
        if sequence:
            loss = sequence_loss(model(kjt))
        else:
            loss = loss_fn(model(dense, kjt).squeeze(-1), labels)
            dense_opt.zero_grad()
        loss.backward()
        if not sequence:
            dense_opt.step()
        losses.append(loss.item())
    result = {"losses": losses, "shards": local_shards(model)}
    if rank == 0:
        result["dense"] = {} if sequence else {
            n: p.detach().cpu().clone() for n, p in model.named_parameters()
            if "sparse_arch" not in n}
    if args.device == "tpu":
        result["fallbacks"] = dict(torchtpu.metrics.fallbacks())
        result["charged"] = torchtpu.torchrec.embedding_costs()
        result["estimate_s"] = torchtpu.metrics.estimate()["device_time_s"]
        result["plan"] = str(model.plan)
    torch.save(result, os.path.join(tmp, f"rank{rank}.pt"))
    dist.destroy_process_group()


def reference(args, world=2):
    """The same training in one process on the CPU, without TorchRec's sharding or fbgemm: the
    unsharded DLRM (nn.EmbeddingBag), every rank's batch in turn, the gradients averaged over the
    ranks (the dense ones by DDP; the embeddings' as TorchRec's output all-to-all scales the
    gradients it sends back to the rows' owners: by 1 / world size), then fbgemm's update written in PyTorch ops on the rows looked up in the
    step (Adam with its bias correction at iteration step + 1, decoupled weight decay 0)."""
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.models.dlrm import DLRM

    tables = [EmbeddingBagConfig(name=f"t{t}", embedding_dim=DIM, num_embeddings=ROWS,
                                 feature_names=[f"f{t}"]) for t in range(TABLES)]
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(
        tables, is_weighted=args.weighted, device=torch.device("meta")),
        dense_in_features=DENSE_IN, dense_arch_layer_sizes=[16, DIM],
        over_arch_layer_sizes=[16, 1], dense_device=torch.device("cpu"))
    ebc = EmbeddingBagCollection(tables, is_weighted=args.weighted, device=torch.device("cpu"))
    model.sparse_arch.embedding_bag_collection = ebc
    weights = {name: bag.weight for name, bag in ebc.embedding_bags.items()}
    with torch.no_grad():
        for name, value in initial_tables().items():
            weights[name].copy_(value)
    dense = [p for n, p in model.named_parameters() if "sparse_arch" not in n]
    state = {name: [torch.zeros_like(w), torch.zeros_like(w)] for name, w in weights.items()}
    losses = [[] for _ in range(world)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for step in range(args.steps):
        model.zero_grad()
        touched = {name: torch.zeros(ROWS, dtype=torch.bool) for name in weights}
        for rank in range(world):
            x, kjt, labels = batch(rank, step, args.weighted, "cpu")
            loss = loss_fn(model(x, kjt).squeeze(-1), labels)
            loss.backward()
            losses[rank].append(loss.item())
            for t in range(TABLES):
                touched[f"t{t}"][kjt[f"f{t}"].values()] = True
        with torch.no_grad():
            for p in dense:
                p -= 0.05 * p.grad / world
            for name, w in weights.items():
                _update_rows(args.optimizer, w, w.grad / world, state[name], touched[name], step + 1)
    return {"losses": losses, "tables": {n: w.detach().clone() for n, w in weights.items()},
            "dense": {n: p.detach().clone() for n, p in model.named_parameters()
                      if "sparse_arch" not in n}}


def _update_rows(optimizer, weight, grad, state, rows, iteration):
    """fbgemm's SGD or Adam on the rows looked up (`rows`, a mask), in place."""
    w, g = weight[rows], grad[rows]
    if optimizer == "sgd":
        weight[rows] = w - 0.05 * g
        return
    if optimizer != "adam":
        raise ValueError(f"no reference for {optimizer} (compared with fbgemm's CPU kernel)")
    m1 = 0.9 * state[0][rows] + 0.1 * g
    m2 = 0.999 * state[1][rows] + 0.001 * g * g
    state[0][rows], state[1][rows] = m1, m2
    weight[rows] = w - 0.01 * ((m1 / (1 - 0.9 ** iteration)) /
                               ((m2 / (1 - 0.999 ** iteration)).sqrt() + 1e-8))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "tpu", "reference"], required=True)
    p.add_argument("--optimizer", choices=["sgd", "rowwise_adagrad", "adam"], default="sgd")
    p.add_argument("--sharding", choices=sorted(SHARDINGS) + ["auto"], default="tw")
    p.add_argument("--weighted", action="store_true")
    p.add_argument("--model", choices=["dlrm", "sequence"], default="dlrm")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.device == "reference":
        r = reference(args)
        out = {"losses": r["losses"], "tables": {k: v.tolist() for k, v in r["tables"].items()},
               "dense": {k: v.tolist() for k, v in r["dense"].items()}}
        with open(args.out, "w") as f:
            json.dump(out, f)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(args, 2, port, tmp), nprocs=2)
        ranks = [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(2)]
    tables = {name: torch.full((ROWS, DIM), float("nan")) for name in initial_tables()}
    for r in ranks:
        for name, (row, col), t in r["shards"]:
            tables[name][row:row + t.shape[0], col:col + t.shape[1]] = t
    out = {"losses": [r["losses"] for r in ranks],
           "tables": {k: v.tolist() for k, v in tables.items()},
           "dense": {k: v.tolist() for k, v in ranks[0]["dense"].items()}}
    for key in ("fallbacks", "charged", "estimate_s", "plan"):
        if key in ranks[0]:
            out[key] = [r[key] for r in ranks]
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    sys.exit(main())
