"""PyTorch Lightning on simulated TPU chips: ``Trainer(accelerator="torchtpu")``
(docs/lightning.md; examples/lightning_fabric_train.py is the same training with Fabric).

    python examples/lightning_train.py                                  # 1 chip, bf16-mixed
    python examples/lightning_train.py --devices 2 --strategy ddp       # DDP over "tpu_dist"
    python examples/lightning_train.py --precision 32-true --steps 20 --json report.json

(Lightning goes in your own environment, ``pip install lightning``; torchtpu's tests keep it in
build/venv-rl, made by ``bash scripts/test_ecosystem.sh``.) An ordinary LightningModule, a small
MLP classifying points of 8 Gaussian clusters, trained by AdamW. torchtpu registers the
accelerator "torchtpu" when Lightning is imported; "tpu" is Lightning's name for XLA. Under DDP
Lightning starts this script again for the second rank, each rank on its own chip (tpu:0,
tpu:1), the gradients all-reduced over torchtpu's "tpu_dist" backend.

Rank 0 prints a report: the steps, the loss at the start and the end, the host time of the
training, and the cost model's estimated TPU time of the same steps on its chip (not measured:
docs/insight.md). Exits with status 1 when the loss did not go down.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

try:
    import lightning.pytorch as L
except ImportError:
    sys.exit("this example needs Lightning: pip install lightning")

import torchtpu  # noqa: E402  (already loaded by `import torch`; named for the metrics)
import torchtpu.metrics  # noqa: E402

CLASSES, WIDTH, HIDDEN, SAMPLES = 8, 32, 256, 4096
LOSS_WINDOW = 5  # steps averaged for the start and end loss


def make_net() -> torch.nn.Module:
    """The classifier's layers (also examples/lightning_fabric_train.py's model)."""
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, CLASSES))


class Classifier(L.LightningModule):
    def __init__(self, lr: float):
        super().__init__()
        self.lr = lr
        self.net = make_net()
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x).float(), y)
        self.log("loss", loss, prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # The global batch's loss: a mean over the ranks (a collective) under DDP.
        self.losses.append(float(self.trainer.strategy.reduce(outputs["loss"].detach(),
                                                              reduce_op="mean")))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class Timing(L.Callback):
    """The training alone: torchtpu's counters reset when it starts, the host time measured."""

    def on_train_start(self, trainer, module):
        torchtpu.metrics.reset()
        self.start = time.perf_counter()

    def on_train_end(self, trainer, module):
        self.seconds = time.perf_counter() - self.start
        self.estimate = torchtpu.metrics.estimate()
        self.counters = torchtpu.metrics.counters()
        self.fallbacks = torchtpu.metrics.fallbacks()


def data(batch: int) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    centers = 0.4 * torch.randn(CLASSES, WIDTH, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    x = centers[y] + torch.randn(SAMPLES, WIDTH, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch,
                                       shuffle=True, generator=g)


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--devices", type=int, default=1, help="simulated chips (one process each)")
    p.add_argument("--strategy", default="auto", help='"auto", "ddp", ... (Lightning\'s)')
    p.add_argument("--precision", default="bf16-mixed",
                   help='"bf16-mixed" (autocast on tpu), "32-true", "bf16-true", ...')
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=64, help="per device")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--json", help="write the report here")
    return p.parse_args()


def report(title: str, args, losses: list[float], seconds: float, metrics: dict,
           world_size: int, strategy: str) -> bool:
    """Rank 0's report of a training (printed, and written to --json); whether the loss went
    down. `metrics`: torchtpu's estimate, counters and fallbacks of the training."""
    est = metrics["estimate"]
    n = min(LOSS_WINDOW, len(losses))
    first, last = sum(losses[:n]) / n, sum(losses[-n:]) / n
    collectives = {k.split(".", 1)[1]: v for k, v in metrics["counters"].items()
                   if k.startswith("collectives.") and not k.endswith("_bytes")}
    print(f"\n{title} {L.__version__} on torchtpu: {world_size} x "
          f"{torch.tpu.get_device_name(torch.tpu.current_device())}, {strategy}, "
          f"precision {args.precision}, {torchtpu.get_eager_mode()} eager")
    print(f"  steps:               {len(losses)} of {args.batch} x {world_size} samples")
    print(f"  loss:                {first:.4f} -> {last:.4f} (mean of the first and last {n})")
    print(f"  host time:           {seconds:.2f} s ({seconds / args.steps * 1e3:.1f} ms per step, "
          f"measured on this machine)")
    band = est.get("error_band")
    band = band.get("label", "") if isinstance(band, dict) else band or ""
    print(f"  estimated TPU time:  {est['parallel_time_s'] * 1e3:.3f} ms on {est['chip']}, "
          f"{est['parallel_time_s'] / args.steps * 1e6:.1f} us per step, {est['launches']:,} "
          f"launches (rank 0's chip; cost model, not measured {band})")
    if collectives:
        print(f"  collectives:         {collectives}, ICI {est['ici_time_s'] * 1e3:.3f} ms")
    print(f"  CPU fallbacks:       {sum(metrics['fallbacks'].values())}")
    ok = last < first
    print("OK: the loss decreased" if ok else "FAIL: the loss did not decrease")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": len(losses), "losses": losses, "host_s": seconds,
                       "world_size": world_size, "precision": args.precision,
                       "strategy": strategy, "estimate": est, "collectives": collectives,
                       "fallbacks": metrics["fallbacks"], "ok": ok}, f, indent=2, default=str)
    return ok


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    L.seed_everything(0, verbose=False)
    timing = Timing()
    model = Classifier(args.lr)
    trainer = L.Trainer(accelerator="torchtpu", devices=args.devices, strategy=args.strategy,
                        precision=args.precision, max_steps=args.steps, callbacks=[timing],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(model, data(args.batch))
    if not trainer.is_global_zero:
        return 0
    metrics = {"estimate": timing.estimate, "counters": timing.counters,
               "fallbacks": timing.fallbacks}
    ok = report("Lightning", args, model.losses, timing.seconds, metrics, trainer.world_size,
                type(trainer.strategy).__name__)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
