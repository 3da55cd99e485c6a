"""The LibTorch C++ example, built through find_package(torchtpu) and run."""
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_cpp_example_builds_and_matches_cpu():
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(ROOT / "examples" / "cpp" / "run.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "linear_tpu: OK" in proc.stdout
    # A program that names the device only (never calls torchtpu::init()) still has it: the
    # linker used to drop libtorchtpu (--as-needed) and "tpu" was an unknown device.
    assert "device_only: OK on tpu:0" in proc.stdout


def test_parameters_keep_their_identity_when_moved():
    # Module.to("tpu") moves parameter data in place (set_data), as it does for CUDA, so
    # optimizers built before the move keep working.
    model = torch.nn.Linear(3, 2)
    weight = model.weight
    model.to("tpu")
    assert model.weight is weight and weight.device.type == "tpu"
