import os

# Compared with PyTorch's float32 on the CPU: full float32 matmul precision, computed as the
# CPU's float32 GEMM (docs/testing.md, "Precision"), in this process and the children it starts.
os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")


def pytest_configure(config):
    config.addinivalue_line("markers", "smoke: the short case of a tier")
