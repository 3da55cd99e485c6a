"""Ray Train on simulated TPU chips: 2 Ray workers, one chip each, DDP over "tpu_dist"
(docs/ecosystem.md, "Ray").

    build/venv-ray/bin/python examples/ray_train.py [--steps 16] [--json out.json]

(Ray lives in its own virtual environment, made by ``bash scripts/test_ray.sh``.) The script
starts a local Ray cluster of 2 CPUs and trains the same small MLP twice with Ray Train's
``TorchTrainer``: once with ``TorchConfig(backend="tpu_dist")``, each worker on a simulated chip
(Ray loads the backend through ``torch_tpu._loader.load()``, torchtpu's TorchTPU-compatible
package, then ``init_process_group("tpu_dist")`` binds each worker to tpu:LOCAL_RANK), and once
with ``TorchConfig(backend="gloo")`` on the CPU. It prints the global loss of every step of both
and their largest difference, and fails (exit 1) when they differ by more than the tolerance
(``TOLERANCE`` below says why that one).

Float32 matmuls run at full precision (``TORCHTPU_MATMUL_PRECISION=highest``), computed as the
CPU's float32 GEMM (``TORCHTPU_HIGHEST_ALGORITHM=float32``): the device's default is one
bfloat16 pass, as the chip's, and the chip's "highest" six bfloat16 passes, neither of which the
CPU computes; the example compares the distributed training itself (docs/testing.md,
"Precision").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

# Before torch is imported here and in the Ray workers, which inherit this environment.
os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

import torch  # noqa: E402

# Largest allowed |tpu - cpu| of a step's loss, relative to the CPU's loss (and of a final
# parameter, relative to the parameter's largest magnitude). At "highest" with the float32
# algorithm a float32 matmul on tpu is PyTorch's float32 CPU GEMM and element-wise ops are
# PyTorch's CPU kernels, and both runs all-reduce the gradients through Gloo's allreduce on the
# same bytes, so the runs agree
# to the last bit on this host (measured: difference 0). What may differ without a defect is the
# order of float32 sums in a kernel (a blocked GEMM's split of the 64-long dot products chosen
# by another thread count): about 64 * 2^-24 = 4e-6 relative for one product, which SGD carries
# on over the steps without growing much for a loss this smooth. 1e-5 allows that and would
# still catch a wrong gradient, a missed all-reduce (each rank's loss alone differs by ~10%)
# or bf16 rounding (the one-pass default differs by ~1e-3).
TOLERANCE = 1e-5


def _train(config: dict) -> None:
    """Ray Train's per-worker loop: same model, data and steps whatever the backend."""
    import torch.distributed as dist

    import ray.train
    import ray.train.torch

    torch.set_float32_matmul_precision("highest")  # the CPU's and the device's float32 matmuls
    ctx = ray.train.get_context()
    rank, size = ctx.get_world_rank(), ctx.get_world_size()
    if config["backend"] == "tpu_dist":
        import torch_tpu

        # TorchTPU's way to the process's chip; the tpu_dist group Ray made bound this worker to
        # tpu:LOCAL_RANK, so the index-less device is that chip.
        device = torch_tpu.api.tpu_device()
        index = torch.tpu.current_device()
        chip = (f"tpu:{index} (chip {torch.tpu.get_device_properties(index).physical_chip}, "
                f"{torch.tpu.get_device_name(index)})")
    else:
        device = ray.train.torch.get_device()  # the CPU: the workers have no accelerator
        chip = str(device)

    torch.manual_seed(0)
    d, hidden = config["width"], config["hidden"]
    net = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.Tanh(),
                              torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
                              torch.nn.Linear(hidden, 1))
    # Ray moves the model to the device and wraps it in DistributedDataParallel.
    net = ray.train.torch.prepare_model(net, move_to_device=device)
    opt = torch.optim.SGD(net.parameters(), lr=config["lr"], momentum=0.9)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(config["samples"], d, generator=g)
    y = (x @ torch.randn(d, 1, generator=g)).tanh()  # what the network learns
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=config["batch"] // size, shuffle=False)
    # Ray adds a DistributedSampler (each worker its share of every global batch).
    loader = ray.train.torch.prepare_data_loader(loader, move_to_device=False)

    losses = []
    step = 0
    start = time.perf_counter()
    while step < config["steps"]:
        for xb, yb in loader:
            if step == config["steps"]:
                break
            loss = torch.nn.functional.mse_loss(net(xb.to(device)), yb.to(device))
            opt.zero_grad()
            loss.backward()  # DDP all-reduces the gradients over the backend
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total, op=dist.ReduceOp.AVG)  # the global batch's loss
            losses.append(total.item())
            step += 1

    seconds = time.perf_counter() - start
    chips = [None] * size
    dist.all_gather_object(chips, f"rank {rank}: {chip}")
    metrics = {"losses": losses, "chips": chips, "backend": dist.get_backend(),
               "train_s": seconds}
    if config["backend"] == "tpu_dist":
        import torchtpu
        import torchtpu.metrics

        metrics["eager_mode"] = torchtpu.get_eager_mode()
        est = torchtpu.metrics.estimate()
        metrics["estimate"] = {k: est[k] for k in ("chip", "parallel_time_s", "ici_time_s",
                                                   "launches")}
        metrics["collectives"] = {k.split(".", 1)[1]: v
                                  for k, v in torchtpu.metrics.counters().items()
                                  if k.startswith("collectives.") and not k.endswith("_bytes")}
    # Rank 0 checkpoints the trained parameters (DDP keeps the ranks' copies equal).
    with tempfile.TemporaryDirectory() as ckpt:
        checkpoint = None
        if rank == 0:
            torch.save({k: v.cpu() for k, v in net.module.state_dict().items()},
                       os.path.join(ckpt, "model.pt"))
            checkpoint = ray.train.Checkpoint.from_directory(ckpt)
        ray.train.report(metrics, checkpoint=checkpoint)


def run(backend: str, args, storage: str) -> dict:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        _train,
        train_loop_config={"backend": backend, "steps": args.steps, "width": 16,
                           "hidden": 64, "samples": 256, "batch": 64, "lr": 0.1},
        torch_config=TorchConfig(backend=backend),
        scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=False),
        run_config=RunConfig(name=f"torchtpu-{backend}", storage_path=storage),
    )
    result = trainer.fit()
    with result.checkpoint.as_directory() as ckpt:
        params = torch.load(os.path.join(ckpt, "model.pt"))
    return dict(result.metrics, params=torch.cat([p.reshape(-1) for p in params.values()]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--eager-mode", choices=("strict", "debug", "fused"),
                   help="TORCHTPU_EAGER_MODE of the workers (default: the environment's)")
    p.add_argument("--json", help="write both runs' losses and the differences here")
    args = p.parse_args()
    if args.eager_mode:
        os.environ["TORCHTPU_EAGER_MODE"] = args.eager_mode  # the workers inherit it

    import ray

    # A local cluster of as many CPUs as workers; Ray Train's controller takes none. Without
    # Ray's dashboard (ray[train] does not install it) Ray Train's placement-group cleaner logs
    # now and then that the State API is unavailable: harmless.
    ray.init(num_cpus=args.workers, include_dashboard=False)
    try:
        with tempfile.TemporaryDirectory(prefix="ray-train-") as storage:
            tpu = run("tpu_dist", args, storage)
            cpu = run("gloo", args, storage)
    finally:
        ray.shutdown()

    loss_diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(tpu["losses"], cpu["losses"]))
    pt, pc = tpu.pop("params"), cpu.pop("params")
    param_diff = float((pt - pc).abs().max() / pc.abs().max())
    print(f"\nRay Train, {args.workers} workers, DDP, {args.steps} steps, "
          f"{tpu.get('eager_mode')} eager on tpu")
    for c in tpu["chips"]:
        print(f"  tpu_dist {c}")
    print(f"  {'step':>4}  {'tpu_dist (tpu)':>16}  {'gloo (cpu)':>16}")
    for i, (a, b) in enumerate(zip(tpu["losses"], cpu["losses"])):
        print(f"  {i:>4}  {a:>16.9f}  {b:>16.9f}")
    print(f"  rank 0's training loop: {tpu['train_s']:.2f} s on tpu, {cpu['train_s']:.2f} s on "
          f"the CPU (host time)")
    print(f"  largest relative difference: losses {loss_diff:.3g}, final parameters "
          f"{param_diff:.3g} (tolerance {TOLERANCE:g})")
    if "estimate" in tpu:
        e = tpu["estimate"]
        print(f"  rank 0's estimated device time on {e.get('chip')}: "
              f"{e.get('parallel_time_s', 0) * 1e3:.3f} ms, ICI {e.get('ici_time_s', 0) * 1e3:.3f} ms; "
              f"collectives {tpu.get('collectives')}")
    ok = (len(tpu["losses"]) == len(cpu["losses"]) == args.steps
          and loss_diff <= TOLERANCE and param_diff <= TOLERANCE
          and tpu["backend"] == "tpu_dist" and cpu["backend"] == "gloo")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tpu": tpu, "cpu": cpu, "loss_diff": loss_diff,
                       "param_diff": param_diff, "tolerance": TOLERANCE, "ok": ok}, f)
    print("OK: equal within tolerance" if ok else "FAILED: the runs differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
