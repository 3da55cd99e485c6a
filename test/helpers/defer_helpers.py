"""What the fused-eager tests share (test_defer.py, test_fused_regions.py): every test runs in
fused eager with fresh metrics (the autouse fixture ``fused``, imported by each file; conftest's
``_clean_state`` gives the next test the tier's mode again), and the metrics' counters."""
import pytest
import torchtpu


@pytest.fixture(autouse=True)
def fused(fresh_state):
    """conftest.py's fresh_state (fresh metrics and Dynamo), in fused eager."""
    torchtpu.set_eager_mode("fused")


def counters():
    return torchtpu.metrics.counters()
