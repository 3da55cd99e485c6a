"""Loop detection in fused eager (docs/eager-modes.md, "Loops that read nothing"; Google
TorchTPU's TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS): a loop that reads nothing is cut where its ops
repeat, each iteration then replays one cached plan, and the results are those of the CPU and of
the same loop run with detection off. Each test sets fused eager itself."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.one_tier("each test sets fused eager and the detection mode itself")


@pytest.fixture(autouse=True)
def fused_with_detection():
    mode = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("fused")
    detection = torchtpu.debug.detect_repeated_ops("safe")
    torchtpu.metrics.reset()
    yield
    torchtpu.debug.detect_repeated_ops(detection)
    torchtpu.set_eager_mode(mode)


def body(x, w):
    """Eighteen recorded ops (matmuls, a mean, element-wise chains): one loop iteration."""
    for _ in range(2):
        x = torch.tanh(x @ w) * 0.5 + x
        x = x - x.mean(dim=-1, keepdim=True)
        x = torch.relu(x) + 0.1 * x
    return x


def run_loop(device, iterations):
    torch.manual_seed(0)
    x, w = torch.randn(32, 32), torch.randn(32, 32) / 8
    x, w = x.to(device), w.to(device)
    for _ in range(iterations):
        x = body(x, w)
    return x.cpu()


def test_a_loop_that_reads_nothing_is_cut_at_each_repetition_and_replays_one_plan():
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        got = run_loop("tpu", 12)
    c = torchtpu.metrics.counters()
    ref = run_loop("cpu", 12)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    # The body's 18 recorded ops repeat from the second iteration on: the first cut after two
    # bodies, then one per body, the last at the end of the twelfth (the read finds nothing).
    assert c["defer.repeated_ops_cuts"] == 11
    assert c["defer.graphs"] == 11
    # The cut graphs are one graph but the first (two bodies): two plans, nine cache hits.
    assert c["defer.cache_misses"] == 2
    assert c["defer.cache_hits"] == 9
    reasons = torchtpu.metrics.materializations()
    assert sum(reasons.get("repeated ops", {}).values()) == 11


def test_off_leaves_the_loop_one_graph_and_computes_the_same():
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        detected = run_loop("tpu", 6)
    assert torchtpu.debug.detect_repeated_ops("off") == "safe"
    torchtpu.metrics.reset()
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        whole = run_loop("tpu", 6)
    c = torchtpu.metrics.counters()
    assert c.get("defer.repeated_ops_cuts", 0) == 0
    assert c["defer.graphs"] == 1
    assert torch.equal(detected, whole)  # the same kernels on the same values, cut elsewhere


def test_a_body_longer_than_128_ops_with_nothing_repeating_inside_is_not_cut():
    # 130 ops, each on its own shape (distinct signatures): the loop's period is over the longest
    # sequence searched, so only the read ends the graph.
    xs = [torch.randn(n + 1).to("tpu") for n in range(130)]
    torchtpu.sync()
    torchtpu.metrics.reset()
    for _ in range(3):
        xs = [x * 1.5 for x in xs]
    got = torch.cat([x.cpu() for x in xs])
    c = torchtpu.metrics.counters()
    assert c.get("defer.repeated_ops_cuts", 0) == 0
    assert c["defer.graphs"] == 1
    assert got.numel() == sum(n + 1 for n in range(130))


def test_ten_op_sequences_are_too_short_but_their_multiples_are_not():
    # A body of 5 ops repeats with period 5 and 10 (below the 11-op minimum), and 15: the loop is
    # cut every three bodies.
    x = torch.randn(64).to("tpu")
    torchtpu.sync()
    torchtpu.metrics.reset()
    for _ in range(12):
        x = ((x * 0.9 + 0.1).sin() - 0.2).abs()
    x.cpu()
    c = torchtpu.metrics.counters()
    assert c["defer.ops_recorded"] == 60
    # A repetition of 15 ends at op 30, then at 45 and 60.
    assert c["defer.repeated_ops_cuts"] == 3


def test_a_training_loop_that_reads_nothing_equals_the_cpu_and_replays_its_plan():
    def train(device, steps):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        model = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(4, 8, 32).to(device), torch.randn(4, 8, 32).to(device)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses).cpu(), [p.detach().cpu() for p in model.parameters()]

    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        losses, params = train("tpu", 8)
    c = torchtpu.metrics.counters()
    ref_losses, ref_params = train("cpu", 8)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-4, atol=1e-5)
    for p, r in zip(params, ref_params):
        torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)
    assert c["defer.repeated_ops_cuts"] >= 6  # (the step is one body, or cut at its layers)
    assert c["defer.cache_hits"] > c["defer.cache_misses"]


@pytest.mark.parametrize("value,expected", [(None, "safe"), ("safe", "safe"),
                                            ("aggressive", "aggressive"), ("", "off"),
                                            ("no", "off")])
def test_torch_tpus_variable_sets_the_mode_at_start(value, expected):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS"}
    if value is not None:
        env["TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS"] = value
    out = subprocess.run([sys.executable, "-c",
                          "import torchtpu; print(torchtpu.debug.detect_repeated_ops())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_a_bad_mode_is_a_value_error():
    with pytest.raises(ValueError, match="safe"):
        torchtpu.debug.detect_repeated_ops("sometimes")
