"""Compiled mode's buckets of dynamic sizes (docs/compiled-mode.md, "Buckets"): each call is charged
the graph's estimate at its bucket's sizes, pricing leaves inputs and generators as eager leaves
them, the forward and the backward are bucketed, a failed pricing leaves the call unpriced, and
max_programs bounds the programs of a dynamic graph."""
import copy

import pytest
import torch
import torch.nn as nn
import torchtpu
from compile_helpers import compiled, fresh  # noqa: F401  (fresh: an autouse fixture)

pytestmark = pytest.mark.not_in_debug_tier(
    "compiled mode's programs run without the eager queue that debug eager makes "
    "synchronous: the strict tier runs them, and the fused tier beside recorded work")

dynamo = pytest.importorskip("torch._dynamo")


def _wide_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256))


def _bucketed_calls(lengths, options=None):
    """The wide MLP compiled with dynamic=True (parameters keep static sizes: only the rows
    vary) and called without gradients at each of `lengths`, checked against the CPU."""
    model = _wide_mlp()
    f = torch.compile(copy.deepcopy(model).to("tpu"), backend="tpu", dynamic=True,
                      options=options)
    with torch.no_grad():
        for n in lengths:
            x = torch.randn(n, 256)
            torch.testing.assert_close(f(x.to("tpu")).cpu(), model(x), rtol=1e-4, atol=1e-4)
    torchtpu.sync()
    programs = torchtpu.metrics.programs()  # (those of earlier tests' graphs may be alive)
    return [p for p in programs if p["name"] == programs[-1]["name"]]


def test_a_call_in_a_bucket_is_charged_the_estimate_of_the_graph_at_the_bucket_sizes():
    if torchtpu.get_eager_mode() == "debug":
        pytest.skip("debug eager runs compiled graphs op by op")
    # 200 rows: bucket 256, priced by a capture at 256 rows (charged nothing); the call at 256
    # takes that program; 100 rows: bucket 128, priced the same way.
    programs = _bucketed_calls([200, 256, 100, 200])
    c = compiled()
    assert c["buckets"] == 2 and c["bucket_programs"] == 2, c
    assert c["programs"] == 3 and c["program_runs"] == 4, c  # (200, 256, 100; 200 replayed)
    assert c["buckets_unpriced"] == {}, c
    by_rows = sorted(programs, key=lambda p: p["own_seconds"])
    p100, p200, p256 = by_rows  # (more rows, more estimated time)
    assert p200["charged_as"] and p200["estimated_seconds"] == p256["own_seconds"]
    assert p200["own_seconds"] < p200["estimated_seconds"]
    assert p256["charged_as"] == "" and p256["estimated_seconds"] == p256["own_seconds"]
    assert p100["charged_as"] and p100["estimated_seconds"] >= p100["own_seconds"]
    # Every run is charged as its bucket (one launch each), the pricing captures are not.
    charged = torchtpu.metrics.op_times()
    name = "compiled::" + p100["name"]
    assert set(charged) == {name}, charged
    expected = (2 * p200["estimated_seconds"] + p256["estimated_seconds"]
                + p100["estimated_seconds"])
    assert charged[name] == pytest.approx(expected, rel=1e-9)
    assert torchtpu.metrics.estimate()["launches"] == 4
    padding = 2 * (p200["estimated_seconds"] - p200["own_seconds"]) + (
        p100["estimated_seconds"] - p100["own_seconds"])
    assert c["padding_s"] == pytest.approx(padding, abs=4e-9)  # (counted in whole ns per run)


@pytest.mark.parametrize("buckets,expected", [(None, 0), (64, 2)])
def test_the_buckets_option_sets_the_sizes_a_call_is_priced_at(buckets, expected):
    if torchtpu.get_eager_mode() == "debug":
        pytest.skip("debug eager runs compiled graphs op by op")
    # None: each call priced at its own rows; 64: 100 -> 128 and 130 -> 192.
    programs = _bucketed_calls([100, 130], {"buckets": buckets})
    c = compiled()
    assert c["buckets"] == expected and c["bucket_programs"] == expected, c
    for p in programs:  # (whether the bucket's estimate is higher depends on tile padding)
        assert bool(p["charged_as"]) == (buckets is not None), p
        assert p["estimated_seconds"] >= p["own_seconds"], p


def test_pricing_a_bucket_leaves_the_inputs_the_graph_writes_as_the_cpu_leaves_them():
    if torchtpu.get_eager_mode() == "debug":
        pytest.skip("debug eager runs compiled graphs op by op")

    def step(x, total):
        total.add_(x.sum(0))  # (a static input the graph writes: pricing must copy it)
        return x * 2

    f = torch.compile(step, backend="tpu", dynamic=True)
    cpu_total, tpu_total = torch.zeros(8), torch.zeros(8).to("tpu")
    for n in (3, 5, 6, 9):
        x = torch.randn(n, 8)
        torch.testing.assert_close(f(x.to("tpu"), tpu_total).cpu(), x * 2)
        step(x, cpu_total)
        torch.testing.assert_close(tpu_total.cpu(), cpu_total)
    c = compiled()
    assert c["bucket_programs"] >= 2 and c["buckets_unpriced"] == {}, c


def test_a_training_step_is_bucketed_forward_and_backward():
    if torchtpu.get_eager_mode() == "debug":
        pytest.skip("debug eager runs compiled graphs op by op")
    cpu_model = _wide_mlp()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    f = torch.compile(tpu_model, backend="tpu", dynamic=True)
    for n in (40, 48, 64, 40):
        x = torch.randn(n, 256)
        f(x.to("tpu")).pow(2).mean().backward()
        cpu_model(x).pow(2).mean().backward()
    for a, b in zip(cpu_model.parameters(), tpu_model.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)
    c = compiled()
    # One bucket (64 rows) per graph: the forward and the backward, each priced at 40 rows.
    assert c["graphs"]["forward"] == 1 and c["graphs"]["backward"] == 1, c
    assert c["buckets"] == 2 and c["bucket_programs"] == 2, c
    assert all(p["charged_as"] for p in torchtpu.metrics.programs()
               if p["own_seconds"] < p["estimated_seconds"])


def test_a_bucket_whose_pricing_run_fails_is_left_unpriced_and_the_call_gives_the_cpus_result():
    """Query, key and value of static sizes, the mask's symbolic (Dynamo relates them through no
    op: the fused attention's meta function does not check the mask): at the bucket's sizes the
    padded mask no longer broadcasts against the scores, and the fused kernel refuses it. Its
    error, raised by the pricing capture's run or reported at the next synchronization where that
    run was enqueued (strict and fused eager), reached the user, though the call's own program is
    right (CPU aot_eager gives the result). A pricing run that fails leaves its bucket unpriced,
    the reason counted, as an error during the capture does."""
    def attend(q, k, v, mask):
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    f = torch.compile(attend, backend="tpu", dynamic=True)
    q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))
    mask = torch.randn(2, 1, 12, 12)
    on_tpu = [t.to("tpu") for t in (q, k, v)]
    for t in on_tpu:
        torch._dynamo.mark_static(t)
    got = f(*on_tpu, mask.to("tpu"))
    torch.tpu.synchronize()
    torch.testing.assert_close(got.cpu(), attend(q, k, v, mask), rtol=1e-4, atol=1e-5)
    c = compiled()
    if torchtpu.get_eager_mode() != "debug":  # (debug eager runs graphs op by op: no buckets)
        assert c["buckets_unpriced"] == {"RuntimeError at the bucket's sizes": 1}, c
        programs = torchtpu.metrics.programs()  # (those of earlier tests' graphs may be alive)
        mine = [p for p in programs if p["name"] == programs[-1]["name"]]
        assert mine and not any(p["charged_as"] for p in mine), mine  # (its own estimate)


def test_max_programs_bounds_the_programs_of_a_dynamic_graph_and_counts_the_rest():
    if torchtpu.get_eager_mode() == "debug":
        pytest.skip("debug eager runs compiled graphs op by op")
    f = torch.compile(lambda x: (x * 2).sum(-1), backend="tpu", dynamic=True,
                      options={"max_programs": 2})
    for n in range(3, 8):
        x = torch.randn(2, n)
        torch.testing.assert_close(f(x.to("tpu")).cpu(), (x * 2).sum(-1))
    c = compiled()
    assert c["dynamo_graphs"] == 1 and c["programs"] == 2, c
    assert c["runs_over_max_programs"] == 3 and c["runs_op_by_op"] == 3, c
    # Those three (5, 6 and 7 columns: bucket 8) are charged as the bucket's program, one launch
    # each, not op by op.
    assert c["runs_charged_as_bucket"] == 3, c
    torchtpu.sync()
    charged = torchtpu.metrics.op_times()
    assert all(k.startswith("compiled::") for k in charged), charged
    assert torchtpu.metrics.estimate()["launches"] == 5
