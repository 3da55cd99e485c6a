"""Lightning Fabric on simulated TPU chips: ``Fabric(accelerator="torchtpu")``
(docs/lightning.md, "Fabric").

    python examples/lightning_fabric_train.py                                # 1 chip, bf16-mixed
    python examples/lightning_fabric_train.py --devices 2 --strategy ddp     # DDP over "tpu_dist"
    python examples/lightning_fabric_train.py --precision 32-true --steps 20 --json report.json

(Lightning goes in your own environment, ``pip install lightning``; torchtpu's tests keep it in
build/venv-rl, made by ``bash scripts/test_ecosystem.sh``.) A training loop of your own, written
with Fabric: ``launch``, ``setup`` of the model and optimizer, ``setup_dataloaders``,
``backward``; a small MLP classifying points of 8 Gaussian clusters, trained by AdamW. torchtpu
registers the accelerator "torchtpu" when Lightning is imported; "tpu" is Lightning's name for
XLA. Under DDP ``fabric.launch()`` starts this script again for the second rank, each rank on its
own chip (tpu:0, tpu:1), the gradients all-reduced over torchtpu's "tpu_dist" backend.

Rank 0 prints a report: the steps, the loss at the start and the end, the host time of the loop,
and the cost model's estimated TPU time of the same steps on its chip (not measured:
docs/insight.md). Exits with status 1 when the loss did not go down.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

try:
    import lightning as L
    from lightning.fabric import Fabric
except ImportError:
    sys.exit("this example needs Lightning: pip install lightning")

import torchtpu  # noqa: E402  (already loaded by `import torch`; named for the metrics)
import torchtpu.metrics  # noqa: E402

CLASSES, WIDTH, HIDDEN, SAMPLES = 8, 32, 256, 4096
LOSS_WINDOW = 5  # steps averaged for the start and end loss


def data(batch: int) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    centers = 0.4 * torch.randn(CLASSES, WIDTH, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    x = centers[y] + torch.randn(SAMPLES, WIDTH, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch,
                                       shuffle=True, generator=g)


def train(fabric: Fabric, args) -> list[float]:
    """The loop: every step's loss, averaged over the ranks."""
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, CLASSES))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer = fabric.setup(model, optimizer)  # on the rank's chip (DDP: wrapped)
    loader = fabric.setup_dataloaders(data(args.batch))  # batches to the chip, sharded by rank
    losses: list[float] = []
    while len(losses) < args.steps:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)  # autocast on "tpu"
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(fabric.all_reduce(loss.detach(), reduce_op="mean")))
            if len(losses) == args.steps:
                break
    return losses


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

    fabric = Fabric(accelerator="torchtpu", devices=args.devices, strategy=args.strategy,
                    precision=args.precision)
    fabric.launch()
    fabric.seed_everything(0, verbose=False)
    torchtpu.metrics.reset()
    start = time.perf_counter()
    losses = train(fabric, args)
    seconds = time.perf_counter() - start
    est, counters = torchtpu.metrics.estimate(), torchtpu.metrics.counters()
    fallbacks = torchtpu.metrics.fallbacks()
    if fabric.global_rank != 0:
        return 0

    n = min(LOSS_WINDOW, len(losses))
    first, last = sum(losses[:n]) / n, sum(losses[-n:]) / n
    collectives = {k.split(".", 1)[1]: v for k, v in counters.items()
                   if k.startswith("collectives.") and not k.endswith("_bytes")}
    print(f"\nLightning Fabric {L.__version__} on torchtpu: {fabric.world_size} x "
          f"{torch.tpu.get_device_name(fabric.device)}, {type(fabric.strategy).__name__}, "
          f"precision {args.precision}, {torchtpu.get_eager_mode()} eager")
    print(f"  steps:               {len(losses)} of {args.batch} x {fabric.world_size} samples")
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
    print(f"  CPU fallbacks:       {sum(fallbacks.values())}")
    ok = last < first
    print("OK: the loss decreased" if ok else "FAIL: the loss did not decrease")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": len(losses), "losses": losses, "host_s": seconds,
                       "world_size": fabric.world_size, "precision": args.precision,
                       "strategy": type(fabric.strategy).__name__, "estimate": est,
                       "collectives": collectives, "fallbacks": fallbacks, "ok": ok},
                      f, indent=2, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
