"""The OpInfo sweep runs in its own pytest process: importing PyTorch's common_utils freezes
torch.backends flags and changes global test state. torchtpu is imported first so that the
device-type test framework sees the "tpu" backend."""
import os

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
import torchtpu  # noqa: E402,F401
