"""Collectives recorded inside fused eager's graphs (docs/distributed.md, "Collectives inside
fused eager's graphs"; Google TorchTPU's TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS=0 and
its SPMD-safe regions): the same values as strict eager and as the default cut, bit for bit,
fewer graphs, FSDP2 and DDP training alike, collectives run on the host kept in order after
recorded ones, and errors that reach every rank. Two rank processes, one chip each."""
import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from test_distributed import free_port, run_ranks

pytestmark = pytest.mark.one_tier(
    "the rank processes set their eager modes themselves (each scenario runs in strict and fused "
    "eager): the tier's mode is not used")

CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "distributed_recorded_child.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The ranks' results of a scenario of distributed_recorded_child.py, run once per module."""
    results = {}

    def run(scenario):
        if scenario not in results:
            results[scenario] = run_ranks(scenario, 2, tmp_path_factory.mktemp(scenario),
                                          child=CHILD)
        return results[scenario]

    return run


def test_an_all_reduce_between_element_wise_ops_gives_strict_eagers_values(ranks):
    for rank, out in enumerate(ranks("eager")):
        # bit for bit: strict eager, the default cut, recorded, and an SPMD-safe region
        assert out["fused-0"] == out["strict-1"], rank
        assert out["fused-1"] == out["strict-1"], rank
        assert out["spmd"] == out["strict-1"], rank
        recorded, cut = out["fused-0-figures"], out["fused-1-figures"]
        # nine collectives, each recorded (with its element-wise ops: one graph, read once)
        assert recorded["recorded"] == 9 and recorded["by_collective"] == 0, recorded
        assert recorded["graphs"] == 1 and recorded["materializations"] == 1, recorded
        assert cut["recorded"] == 0 and cut["by_collective"] >= 9, cut
        assert cut["graphs"] > 9, cut
        assert out["spmd-figures"]["recorded"] == 9, out["spmd-figures"]
        # charged once each, as when they run on the host
        assert recorded["all_reduce"] == cut["all_reduce"] == 6
        assert recorded["reduce_scatter"] == cut["reduce_scatter"] == 1


def test_a_loop_of_steps_with_collectives_runs_fewer_graphs(ranks):
    for rank, out in enumerate(ranks("eager")):
        assert out["loop-fused-0"] == out["loop-strict-1"] == out["loop-fused-1"], rank
        recorded, cut = out["loop-fused-0-figures"], out["loop-fused-1-figures"]
        # six steps of three collectives: cut at each, or one graph per step (loop detection)
        assert cut["by_collective"] >= 18 and recorded["by_collective"] == 0, (cut, recorded)
        assert recorded["recorded"] == 18
        assert recorded["graphs"] < cut["graphs"] / 2, (recorded, cut)
        assert recorded["materializations"] < cut["materializations"] / 2, (recorded, cut)
        # DDP: the same losses and parameters; its bucket all-reduces no longer cut the step
        for name in ("ddp-fused-0", "ddp-fused-1"):
            assert out[name + "-losses"] == out["ddp-strict-1-losses"], (rank, name)
            assert out[name] == out["ddp-strict-1"], (rank, name)
        # (six steps: one all-reduce each, one bucket)
        ddp_recorded, ddp_cut = out["ddp-fused-0-figures"], out["ddp-fused-1-figures"]
        assert ddp_recorded["recorded"] == 6 and ddp_recorded["by_collective"] == 0, ddp_recorded
        assert ddp_cut["by_collective"] == 6, ddp_cut
        assert ddp_recorded["graphs"] < ddp_cut["graphs"], (ddp_recorded, ddp_cut)
        print(f"rank {rank}: graphs / materializations, 6 steps: loop {cut['graphs']} / "
              f"{cut['materializations']} cut, {recorded['graphs']} / "
              f"{recorded['materializations']} recorded; DDP {ddp_cut['graphs']} / "
              f"{ddp_cut['materializations']} cut, {ddp_recorded['graphs']} / "
              f"{ddp_recorded['materializations']} recorded")


def test_fsdp2_trains_as_in_strict_eager(ranks):
    for rank, out in enumerate(ranks("fsdp2")):
        for name in ("fused-0", "fused-1"):
            for got, want in zip(out[name], out["strict-1"], strict=True):
                torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=0,
                                           msg=f"rank {rank}, {name}")
        assert out["fused-0-figures"]["recorded"] > 0, out["fused-0-figures"]


def test_collectives_run_on_the_host_after_recorded_ones_stay_in_order(ranks):
    for rank, out in enumerate(ranks("host")):
        assert out["recorded"] == [3.0] * 3
        assert out["cpu"] == [30.0] * 5
        assert out["after_barrier"] == [6.0] * 2
        assert out["all_to_all"] == [float(10 * r + rank) for r in range(2)]
        assert out["figures"]["recorded"] == 2, out["figures"]
        assert out["two_streams"] == [[3.0] * 4, [0.0, 0.0, 1.0, 1.0]]
        assert out["two_streams_recorded"] == 2


def test_recorded_collectives_of_different_shapes_raise_on_every_rank(ranks):
    for rank, out in enumerate(ranks("host")):
        assert "ranks passed tensors of different shapes or dtypes" in out["error"], out["error"]
        assert f"rank {rank} passed [Float[{4 + rank}]]" in out["error"], out["error"]
        assert out["after"] == [4.0, 4.0]


def test_a_rank_that_dies_makes_the_other_raise_where_its_graph_runs():
    """(TorchTPU's variable, set to "false" in the environment.)"""
    code = (
        "import os, sys, datetime, torch, torch.distributed as dist, torchtpu\n"
        "rank = int(sys.argv[1])\n"
        "os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=sys.argv[2])\n"
        "torch.tpu.set_device(rank)\n"
        "dist.init_process_group('tpu_dist', rank=rank, world_size=2,\n"
        "                        timeout=datetime.timedelta(seconds=20))\n"
        "assert not torchtpu.distributed.materialize_collective_tensors()\n"
        "torchtpu.set_eager_mode('fused')\n"
        "x = torch.ones(4, device=f'tpu:{rank}') * 2\n"
        "dist.all_reduce(x)\n"
        "if rank == 1:\n"
        "    os._exit(3)  # (dies: its recorded all-reduce never runs)\n"
        "try:\n"
        "    print((x + 1).cpu())\n"
        "except RuntimeError as e:\n"
        "    print('RAISED', str(e).splitlines()[0])\n")
    port = str(free_port())
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)),
               TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS="false")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r), port], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
    try:
        out0, err0 = procs[0].communicate(timeout=120)
        procs[1].communicate(timeout=120)
    finally:
        for p in procs:
            p.kill()
    assert procs[1].returncode == 3
    assert "RAISED" in out0 and "tpu_dist::all_reduce_" in out0, (out0, err0[-2000:])


def test_the_variable_reads_as_torchtpus():
    from torchtpu import distributed as tpu_dist

    spellings = ("0", "false", "False", " 0 ", "1", "true", "x")
    assert [tpu_dist._materializes(v) for v in spellings] == [False] * 4 + [True] * 3
    previous = tpu_dist.materialize_collective_tensors()
    try:
        assert tpu_dist.materialize_collective_tensors(False) is False
        assert not tpu_dist.is_spmd_safe()
        tpu_dist.enter_spmd_safe_region()
        assert tpu_dist.is_spmd_safe()
        tpu_dist.exit_spmd_safe_region()
        with pytest.raises(RuntimeError, match="no SPMD-safe region"):
            tpu_dist.exit_spmd_safe_region()
    finally:
        tpu_dist.materialize_collective_tensors(previous)
