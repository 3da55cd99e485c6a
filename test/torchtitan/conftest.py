import os

# Compared with PyTorch's float32 on the CPU: full float32 matmul precision, computed as the
# CPU's float32 GEMM (docs/testing.md, "Precision"), in this process and the ranks it starts.
os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")
# One intra-op thread per process, as torchrun sets for several ranks: a single-rank run left
# at the machine's 2 threads took 5x longer on a shared 2-core machine (both devices).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "smoke: the short case of a tier")
