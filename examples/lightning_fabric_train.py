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

import sys
import time

import torch

try:
    from lightning.fabric import Fabric
except ImportError:
    sys.exit("this example needs Lightning: pip install lightning")

import torchtpu  # noqa: E402  (already loaded by `import torch`; named for the metrics)
import torchtpu.metrics  # noqa: E402

# The data, the model's layers, the arguments and the report: the Trainer example's.
from lightning_train import data, make_net, parse_args, report  # noqa: E402


def train(fabric: Fabric, args) -> list[float]:
    """The loop: every step's loss, averaged over the ranks."""
    model = make_net()
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
    args = parse_args(__doc__.splitlines()[0])
    fabric = Fabric(accelerator="torchtpu", devices=args.devices, strategy=args.strategy,
                    precision=args.precision)
    fabric.launch()
    fabric.seed_everything(0, verbose=False)
    torchtpu.metrics.reset()
    start = time.perf_counter()
    losses = train(fabric, args)
    seconds = time.perf_counter() - start
    metrics = {"estimate": torchtpu.metrics.estimate(), "counters": torchtpu.metrics.counters(),
               "fallbacks": torchtpu.metrics.fallbacks()}
    if fabric.global_rank != 0:
        return 0
    ok = report("Lightning Fabric", args, losses, seconds, metrics, fabric.world_size,
                type(fabric.strategy).__name__)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
