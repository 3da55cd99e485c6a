"""FSDP2 training on simulated TPU chips, one per process (docs/distributed.md): the model of
examples/train_ddp.py with fully_shard (parameters, gradients and optimizer state sharded;
all-gathers before use, reduce-scatters of the gradients).

    python -m torch.distributed.run --nproc-per-node 2 examples/train_fsdp.py [--steps 20]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv.insert(1, "--fsdp")

from train_ddp import main  # noqa: E402

if __name__ == "__main__":
    main()
