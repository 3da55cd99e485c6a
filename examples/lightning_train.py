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


class Classifier(L.LightningModule):
    def __init__(self, lr: float):
        super().__init__()
        self.lr = lr
        self.net = torch.nn.Sequential(
            torch.nn.Linear(WIDTH, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.GELU(),
            torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, CLASSES))
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=1, help="simulated chips (one process each)")
    p.add_argument("--strategy", default="auto", help='"auto", "ddp", ... (Lightning\'s)')
    p.add_argument("--precision", default="bf16-mixed",
                   help='"bf16-mixed" (autocast on tpu), "32-true", "bf16-true", ...')
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=64, help="per device")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--json", help="write the report here")
    args = p.parse_args()

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

    n = min(LOSS_WINDOW, len(model.losses))
    first, last = sum(model.losses[:n]) / n, sum(model.losses[-n:]) / n
    est = timing.estimate
    collectives = {k.split(".", 1)[1]: v for k, v in timing.counters.items()
                   if k.startswith("collectives.") and not k.endswith("_bytes")}
    chip = torch.tpu.current_device()
    print(f"\nLightning {L.__version__} on torchtpu: {trainer.world_size} x "
          f"{torch.tpu.get_device_name(chip)}, {type(trainer.strategy).__name__}, "
          f"precision {args.precision}, {torchtpu.get_eager_mode()} eager")
    print(f"  steps:               {len(model.losses)} of {args.batch} x {trainer.world_size} "
          f"samples")
    print(f"  loss:                {first:.4f} -> {last:.4f} (mean of the first and last {n})")
    print(f"  host time:           {timing.seconds:.2f} s ({timing.seconds / args.steps * 1e3:.1f} "
          f"ms per step, measured on this machine)")
    band = est.get("error_band")
    band = band.get("label", "") if isinstance(band, dict) else band or ""
    print(f"  estimated TPU time:  {est['parallel_time_s'] * 1e3:.3f} ms on {est['chip']}, "
          f"{est['parallel_time_s'] / args.steps * 1e6:.1f} us per step, {est['launches']:,} "
          f"launches (rank 0's chip; cost model, not measured {band})")
    if collectives:
        print(f"  collectives:         {collectives}, ICI {est['ici_time_s'] * 1e3:.3f} ms")
    print(f"  CPU fallbacks:       {sum(timing.fallbacks.values())}")
    ok = last < first
    print("OK: the loss decreased" if ok else "FAIL: the loss did not decrease")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": len(model.losses), "losses": model.losses, "host_s": timing.seconds,
                       "world_size": trainer.world_size, "precision": args.precision,
                       "estimate": est, "collectives": collectives,
                       "fallbacks": timing.fallbacks, "ok": ok}, f, indent=2, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
