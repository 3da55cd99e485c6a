"""One Lightning training for test_lightning.py, in a process of its own (the eager mode is the
process's, and Lightning's DDP launches this script again for each further rank).

    python run_lightning.py --accelerator torchtpu|cpu --devices N [--strategy ddp]
        [--precision 32-true|bf16-mixed] [--steps N] [--batch B] [--fabric] --out result.json

``--fabric`` trains the same model on the same data with Lightning Fabric's loop instead of the
Trainer (``Fabric(...)``, ``launch``, ``setup``, ``setup_dataloaders``, ``backward``): the same
steps, as the data loader does not shuffle and Fabric's DistributedSampler keeps that order
(rank r takes the samples r, r + R, ...).

A small regression MLP (Linear, LayerNorm, GELU), seeded, trained by SGD with momentum on a fixed
data set. Under DDP Lightning gives each rank a DistributedSampler that shuffles with the seed
of ``seed_everything`` (0) and hands rank r the positions r, r + R, ... of that permutation, so
at each step the R ranks' batches of B together are the next R * B samples of the permutation:
one process reading the permutation (``--order-seed 0``) in batches of R * B takes the same
steps. Rank 0 writes the losses of every step, the whole data set's loss before and after, the
trained parameters and what Lightning chose (strategy, root device, autocast device, process group
backend) as JSON.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import time

import torch

import lightning.pytorch as L

WIDTH, HIDDEN, SAMPLES = 16, 64, 512


def make_net() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, 1))


class Regressor(L.LightningModule):
    def __init__(self, lr: float):
        super().__init__()
        self.lr = lr
        self.net = make_net()
        self.losses: list[float] = []
        self.seen: dict = {}

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        if not self.seen:  # what autocast made of the first matmul, where the batch lives
            self.seen = {"matmul_dtype": str(out.dtype).replace("torch.", ""),
                         "batch_device": str(x.device), "param_device": str(next(
                             self.parameters()).device)}
        loss = torch.nn.functional.mse_loss(out.float(), y)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        loss = outputs["loss"].detach().clone()
        if self.trainer.world_size > 1:  # the global batch's loss
            loss = self.trainer.strategy.reduce(loss, reduce_op="mean")
        self.losses.append(float(loss))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def data(batch: int, order_seed: int | None = None) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, WIDTH, generator=g)
    y = torch.tanh(x @ torch.randn(WIDTH, 1, generator=g) / WIDTH**0.5)
    sampler = None
    if order_seed is not None:  # the order of a DistributedSampler's first epoch
        sampler = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(order_seed))
        sampler = sampler.tolist()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch,
                                       sampler=sampler, shuffle=False)


def full_loss(net: torch.nn.Module, loader) -> float:
    """The float32 loss over the whole data set, on the CPU (a copy of the model)."""
    net = copy.deepcopy(net).cpu().float()
    x, y = loader.dataset.tensors
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(net(x), y))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--accelerator", default="torchtpu")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--strategy", default="auto")
    p.add_argument("--precision", default="32-true")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--order-seed", type=int,
                   help="read the samples in the order Lightning's DistributedSampler shuffles "
                        "them with this seed (seed_everything's) in the first epoch")
    p.add_argument("--out", required=True)
    p.add_argument("--fabric", action="store_true", help="Lightning Fabric instead of the Trainer")
    args = p.parse_args()

    torch.set_float32_matmul_precision("highest")
    if args.fabric:
        return fabric_main(args)
    L.seed_everything(0, verbose=False)
    model = Regressor(args.lr)
    trainer = L.Trainer(accelerator=args.accelerator, devices=args.devices,
                        strategy=args.strategy, precision=args.precision,
                        max_steps=args.steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    loader = data(args.batch, args.order_seed)
    before = full_loss(model.net, loader)
    start = time.perf_counter()
    trainer.fit(model, loader)
    seconds = time.perf_counter() - start
    if trainer.global_rank != 0:
        return
    result = {
        "losses": model.losses,
        "data_loss": [before, full_loss(model.net, loader)],
        "params": {k: v.detach().cpu().reshape(-1).tolist() for k, v in model.state_dict().items()},
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "root_device": str(trainer.strategy.root_device),
        "precision": type(trainer.precision_plugin).__name__,
        "autocast_device": getattr(trainer.precision_plugin, "device", None),
        "world_size": trainer.world_size,
        "backend": getattr(trainer.strategy, "_process_group_backend", None),
        "fit_s": seconds,
        **model.seen,
    }
    write(args, result)


def write(args, result: dict) -> None:
    """Adds the process group's backend and torchtpu's counters, and writes the JSON."""
    import torch.distributed as dist

    if dist.is_initialized():
        result["backend"] = dist.get_backend()
    if args.accelerator == "torchtpu":
        import torchtpu
        import torchtpu.metrics

        counters = torchtpu.metrics.counters()
        result["eager_mode"] = torchtpu.get_eager_mode()
        result["fallbacks"] = torchtpu.metrics.fallbacks()
        result["collectives"] = {k: v for k, v in counters.items()
                                 if k.startswith("collectives.") and not k.endswith("_bytes")}
        est = torchtpu.metrics.estimate()
        result["estimate"] = {k: est.get(k) for k in ("chip", "parallel_time_s", "launches")}
    with open(args.out, "w") as f:
        json.dump(result, f)


def fabric_main(args) -> None:
    """The same training through Lightning Fabric."""
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
                    precision=args.precision)
    fabric.launch()  # under DDP: this script again for each further rank
    fabric.seed_everything(0, verbose=False)
    net = make_net()
    seen: dict = {}

    def first_matmul(module, inputs, out):  # what autocast made of it, where the batch lives
        seen.update(matmul_dtype=str(out.dtype).replace("torch.", ""),
                    batch_device=str(inputs[0].device))
        hook.remove()

    loader = data(args.batch)
    before = full_loss(net, loader)
    hook = net[0].register_forward_hook(first_matmul)
    model, optimizer = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=args.lr,
                                                         momentum=0.9))
    train_loader = fabric.setup_dataloaders(loader)
    losses: list[float] = []
    start = time.perf_counter()
    while len(losses) < args.steps:
        for x, y in train_loader:
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(fabric.all_reduce(loss.detach(), reduce_op="mean")))
            if len(losses) == args.steps:
                break
    seconds = time.perf_counter() - start
    if fabric.global_rank != 0:
        return
    strategy = fabric.strategy
    write(args, {
        "losses": losses,
        "data_loss": [before, full_loss(net, loader)],
        "params": {f"net.{k}": v.detach().cpu().reshape(-1).tolist()  # the Trainer's names
                   for k, v in net.state_dict().items()},
        "accelerator": type(fabric.accelerator).__name__,
        "strategy": type(strategy).__name__,
        "root_device": str(strategy.root_device),
        "precision": type(strategy.precision).__name__,
        "autocast_device": getattr(strategy.precision, "device", None),
        "world_size": fabric.world_size,
        "backend": getattr(strategy, "_process_group_backend", None),
        "param_device": str(next(model.parameters()).device),
        "module": type(model._forward_module).__name__,  # DistributedDataParallel under DDP
        "fit_s": seconds,
        **seen,
    })


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
