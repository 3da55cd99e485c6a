"""TorchTitan's llama3 debug model on simulated TPU chips (docs/ecosystem.md, "TorchTitan").

    build/venv-titan/bin/python examples/torchtitan_llama3.py [--chips 1|2] [--parallel fsdp|tp]
        [--steps 10] [--eager-mode strict|debug|fused] [--compile] [--assets DIR] [-- TITAN ARGS]

(TorchTitan lives in its own virtual environment, made by ``bash scripts/test_torchtitan.sh``.)
The script launches TorchTitan's own entry point, ``torchtitan.train.main()``, under torchrun
with one process per chip: ``--module llama3 --config llama3_debugmodel``, 4 sequences of 128
tokens a rank. TorchTitan picks "tpu" itself (the device torchtpu registers is the available
accelerator) and "tpu_dist" as its process group's backend, so each rank trains on its own chip
(tpu:LOCAL_RANK), FSDP2 or tensor parallelism over the simulated ICI. Arguments after ``--`` go
to TorchTitan (``--training.steps``, ``--parallelism.*``, ``--compile.enable``, ...).

When training is done each rank prints what torchtpu's cost model says a training step would
take on a real TPU of each generation (``torchtpu.metrics.estimate(chip)``, the steps' launches
priced after the fact: docs/insight.md), with its calibration error band, beside the host
seconds a step took here, and the ops that ran through the CPU fallback (none).

TorchTitan's PyPI wheel ships no tokenizer or dataset; ``--assets DIR`` takes TorchTitan's own
``tests/assets`` (a clone of its repository: ``tokenizer/`` and ``c4_test/``), and without it
the stand-ins of test/torchtitan/titan_assets.py are written to a temporary folder (a byte-level
BPE tokenizer of 2,000 entries and 600 synthetic documents).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _launch(argv: list[str]) -> int:
    titan_extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, titan_extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chips", type=int, default=1, choices=(1, 2))
    p.add_argument("--parallel", choices=("fsdp", "tp"), default="fsdp",
                   help="with 2 chips: FSDP2 (data_parallel_shard_degree=2) or tensor parallel")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--eager-mode", choices=("strict", "debug", "fused"), default="strict")
    p.add_argument("--compile", action="store_true", help="TorchTitan's --compile.enable")
    p.add_argument("--assets", help="a folder with tokenizer/ and c4_test/ (TorchTitan's "
                   "tests/assets); default: stand-ins written to a temporary folder")
    a = p.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="torchtitan-llama3-")
    if a.assets:
        tokenizer, dataset = (os.path.join(a.assets, d) for d in ("tokenizer", "c4_test"))
    else:
        sys.path.insert(0, os.path.join(ROOT, "test", "torchtitan"))
        import titan_assets

        paths = titan_assets.write(os.path.join(tmp, "assets"))
        tokenizer, dataset = paths["tokenizer"], paths["dataset"]
    titan = ["--module", "llama3", "--config", "llama3_debugmodel",
             "--hf-assets-path", tokenizer, "--dataloader.dataset-path", dataset,
             "--training.seq-len", "128", "--training.local-batch-size", "4",
             "--training.steps", str(a.steps), "--validator.no-enable",
             "--dump-folder", os.path.join(tmp, "outputs")]
    if a.chips == 2:
        # TorchTitan 0.3.0's default SPMD backend fails at fully_shard under torch 2.13 (on the
        # CPU as on tpu); its DTensor backend is what runs.
        titan += ["--parallelism.spmd-backend", "partial_dtensor"]
        titan += (["--parallelism.data-parallel-shard-degree", "2"] if a.parallel == "fsdp"
                  else ["--parallelism.tensor-parallel-degree", "2"])
    if a.compile:
        titan.append("--compile.enable")
    env = dict(os.environ, TORCHTPU_EAGER_MODE=a.eager_mode, OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", HF_DATASETS_CACHE=os.path.join(tmp, "hf"))
    what = f"{a.chips} chip(s)" + (f", {a.parallel}" if a.chips == 2 else "")
    print(f"TorchTitan llama3 debugmodel on {what}, {a.steps} steps, {a.eager_mode} eager"
          f"{', compiled' if a.compile else ''}", flush=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(a.chips), os.path.abspath(__file__), "--worker",
           *titan, *titan_extra]
    return subprocess.call(cmd, env=env, cwd=tmp)


def _worker(argv: list[str]) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    import torchtpu
    import torchtpu.metrics

    # TorchTitan 0.3.0 calls torch.distributed.set_timeout after its first step, which torch
    # 2.14 added; torch 2.13 has the same function as distributed_c10d._set_pg_timeout.
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = distributed_c10d._set_pg_timeout

    from torchtitan import train
    from torchtitan.trainer import Trainer

    run = {}
    original = Trainer.train

    def timed_train(self):
        torch.tpu.synchronize()
        run["init_fallbacks"] = torchtpu.metrics.fallbacks()
        torchtpu.metrics.reset()  # price the training steps, not building the model
        start = time.perf_counter()
        original(self)
        torch.tpu.synchronize()
        run["seconds"], run["steps"] = time.perf_counter() - start, self.step
        run["device"] = str(self.device)

    Trainer.train = timed_train
    sys.argv = [train.__file__, *argv]
    train.main()

    steps = max(run.get("steps", 0), 1)
    rank = int(os.environ.get("RANK", "0"))
    fallbacks = {**run.get("init_fallbacks", {}), **torchtpu.metrics.fallbacks()}
    lines = [f"rank {rank} on {run.get('device')} ({torch.tpu.get_device_name()}), "
             f"{torchtpu.get_eager_mode()} eager: {run.get('seconds', 0) / steps:.2f} s of host "
             f"time a step here"]
    for chip in ("v5e", "v6e", "v7"):
        e = torchtpu.metrics.estimate(chip)
        lines.append(f"  estimated step on a TPU {chip}: {e['parallel_time_s'] / steps * 1e3:.2f} "
                     f"ms ({e['error_band']['label']}), {e['launches'] // steps} launches, "
                     f"ICI {e['ici_time_s'] / steps * 1e3:.3f} ms, bound by {e['bottleneck']}")
    lines.append(f"  CPU fallbacks: {fallbacks or 'none'}")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2:])
    else:
        sys.exit(_launch(sys.argv[1:]))
