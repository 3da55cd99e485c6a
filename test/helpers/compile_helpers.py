"""What the compiled-mode tests share (test_compile*.py): a fresh Dynamo and fresh metrics around
each test (the autouse fixture ``fresh``, imported by each file: conftest.py's fresh_state), the
compiled-mode metrics, and a small MLP."""
import pytest
import torch
import torch.nn as nn

import torchtpu


@pytest.fixture(autouse=True)
def fresh(fresh_state):
    """conftest.py's fresh_state (fresh metrics and Dynamo) around every test of the file."""


def compiled():
    return torchtpu.metrics.compiled()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8))
