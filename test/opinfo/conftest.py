"""The OpInfo sweep runs in its own pytest process: importing PyTorch's common_utils freezes
torch.backends flags and changes global test state. torchtpu is imported first so that the
device-type test framework sees the "tpu" backend."""
import os

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: op semantics against the CPU at
# PyTorch's float32 tolerances)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")
import torchtpu  # noqa: E402,F401
