"""What the compiled-mode tests share (test_compile*.py): a fresh Dynamo and fresh metrics around
each test (the autouse fixture ``fresh``, imported by each file), the compiled-mode metrics, and a
small MLP."""
import pytest
import torch
import torch.nn as nn

import torchtpu


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    torchtpu.metrics.reset()
    yield
    torch._dynamo.reset()


def compiled():
    return torchtpu.metrics.compiled()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8))
