"""What the fused-eager tests share (test_defer.py, test_fused_regions.py): every test runs in
fused eager with fresh metrics (the autouse fixture ``fused``, imported by each file), and the
metrics' counters."""
import pytest
import torchtpu


@pytest.fixture(autouse=True)
def fused():
    mode = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("fused")
    torchtpu.metrics.reset()
    yield
    torchtpu.set_eager_mode(mode)


def counters():
    return torchtpu.metrics.counters()
