"""The c10d backend "tpu_dist" (docs/distributed.md): every collective against its definition
at world sizes 2 and 4, DDP / FSDP2 / tensor parallel training equal to one CPU process on the
whole batch, and the ICI cost model against the ring formulas. Ranks are separate processes,
one simulated chip each, as torchrun would start them."""
import json
import os
import re
import socket
import subprocess
import sys

import pytest
from conftest import aborted_at_exit
import torch

import torchtpu

pytestmark = pytest.mark.not_in_debug_tier(
    "rank processes: debug eager runs the kernels strict eager runs, without the queue, which "
    "the collectives' results and the training runs do not depend on; CI time budget")


CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "distributed_child.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(scenario: str, size: int, tmp_path, visible_chip_per_rank=False,
              child: str = CHILD) -> list[dict]:
    """Runs `child` (argv: scenario, rank, size, port, JSON path) as `size` rank processes and
    returns what each wrote (test_rng_state.py's DTensor scenario is its own child)."""
    port = str(free_port())
    paths = [tmp_path / f"rank{r}.json" for r in range(size)]
    # (The ranks import the torchtpu this test imported.)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)))

    def env_of(rank):
        return dict(env, TPU_VISIBLE_CHIPS=str(rank)) if visible_chip_per_rank else env

    procs = [subprocess.Popen([sys.executable, child, scenario, str(r), str(size), port,
                               str(paths[r])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env_of(r)) for r in range(size)]
    errors = []
    for r, p in enumerate(procs):
        try:
            _, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            errors.append(f"rank {r} timed out:\n{err[-3000:]}")
            continue
        if p.returncode != 0 and not (paths[r].exists() and aborted_at_exit(p.returncode, err)):
            errors.append(f"rank {r} exited {p.returncode}:\n{err[-3000:]}")
    assert not errors, "\n".join(errors)
    return [json.loads(p.read_text()) for p in paths]


@pytest.mark.parametrize("size,visible", [(2, False), (4, False), (2, True)],
                         ids=["2", "4", "2-one-visible-chip-per-rank"])
def test_every_collective_matches_its_definition(size, visible, tmp_path):
    results = run_ranks("collectives", size, tmp_path, visible_chip_per_rank=visible)
    ranks = range(size)
    total = sum(r + 1 for r in ranks)
    for rank, out in enumerate(results):
        assert out["backend"] == "tpu_dist"
        # rank -> chip: tpu:<rank>, or with TPU_VISIBLE_CHIPS=<rank> the process's only chip
        assert out["device"] == ("tpu:0" if visible else f"tpu:{rank}")
        assert out["physical_chip"] == rank
        assert out["all_reduce_sum"] == [float(total)] * 4
        assert out["all_reduce_avg"] == pytest.approx([total / size] * 3)
        assert out["all_reduce_max"] == [float(size)] * 3
        assert out["all_reduce_min"] == [1.0] * 3
        prod = 1.0
        for r in ranks:
            prod *= r + 1
        assert out["all_reduce_product"] == [prod] * 3
        assert out["all_reduce_premul_float"] == [0.5 * total] * 3
        assert out["all_reduce_premul_tensor"] == [0.25 * total] * 3
        assert out["reduce_scatter_premul"] == [0.5 * total * (2 * rank + j) for j in range(2)]
        assert out["reduce_premul"] == ([2.0 * total] * 2 if rank == 0 else [float(rank + 1)] * 2)
        assert out["broadcast"] == [float(size - 1)] * 3
        if rank == 0:
            assert out["reduce"] == [float(total)] * 2
        assert out["all_gather_into_tensor"] == [float(r) for r in ranks for _ in range(2)]
        assert out["all_gather"] == [[float(r)] * 2 for r in ranks]
        whole = [float(i) * total for i in range(2 * size)]
        assert out["reduce_scatter_tensor"] == whole[2 * rank: 2 * rank + 2]
        assert out["reduce_scatter"] == [float(sum(r + rank for r in ranks))] * 2
        assert out["all_to_all_single"] == [float(10 * r + rank) for r in ranks]
        assert out["all_to_all"] == [[float(10 * r + rank)] for r in ranks]
        assert out["all_to_all_uneven"] == [[[float(10 * r + rank)] * 2] * (rank + 1) for r in ranks]
        assert out["ring"] == [float((rank - 1) % size)] * 2
        assert out["cpu_all_reduce"] == [float(size)] * 2
        assert out["default_device_all_reduce"] == [float(size)] * 3
        # Charged and counted: one launch per collective, ICI time for the slice.
        assert out["counters"]["collectives.all_reduce"] >= 7
        assert out["counters"]["collectives.all_gather_bytes"] > 0
        assert out["ici_time_s"] > 0


@pytest.mark.parametrize("size", [2, 4])
def test_ddp_fsdp2_and_tensor_parallel_train_like_one_cpu_process(size, tmp_path):
    if size == 4 and torchtpu.get_eager_mode() != "strict":
        pytest.skip("world size 4 in the strict tier only (four rank processes on two cores: "
                    "CI's time budget); world size 2 runs in every tier")
    from distributed_child import batch, small_model  # (test/helpers: on sys.path by conftest.py)

    results = run_ranks("training", size, tmp_path)
    ref = small_model()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = batch()
    for _ in range(3):
        torch.nn.functional.mse_loss(ref(x), y).backward()
        opt.step()
        opt.zero_grad()
    expected = [p.detach() for p in ref.parameters()]
    kinds = ["ddp", "ddp_no_sync_buckets", "ddp_compiled", "fsdp2", "fsdp2_no_reshard",
             "fsdp2_compiled", "tensor_parallel"]
    for rank, out in enumerate(results):
        assert sorted(k for k in kinds if k in out) == sorted(kinds)
        assert all(t > 0 for t in out["ddp_timing_ns"]), out["ddp_timing_ns"]  # DDP's timer
        for kind in kinds:
            got = [torch.tensor(p) for p in out[kind]]
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6, msg=kind)
        # Mixed precision (bf16 parameters in compute, fp32 gradients reduced): bf16's 8-bit
        # mantissa over three steps, so the tolerance is bf16's (2^-8 relative) with margin.
        for g, e in zip(out["fsdp2_bf16"], expected):
            torch.testing.assert_close(torch.tensor(g), e, rtol=2e-2, atol=2e-2, msg="fsdp2_bf16")
        whole = torch.arange(4.0 * size * 3).reshape(4 * size, 3)
        assert out["dtensor_local_device"] == f"tpu:{rank}" and out["dtensor_local_rows"] == 4
        assert out["dtensor_replicated"] == whole.tolist()
        total = float(sum(r + 1 for r in range(size)))
        assert out["dtensor_partial_to_replicate"] == [[total] * 2] * (2 * size)
        assert out["dtensor_partial_to_shard"] == [[total] * 2] * 2
        assert out["dtensor_matmul"] == (whole @ torch.ones(3, 2)).tolist()


def test_sharded_state_saves_and_loads_with_distributed_checkpoint(tmp_path):
    for rank, out in enumerate(run_ranks("checkpoint", 2, tmp_path)):
        assert out["shard_devices"] == [f"tpu:{rank}"]  # the shards live on the chips
        assert out["loaded_equal"] and out["next_step_equal"], out
        assert "__0_0.distcp" in out["files"] and "__1_0.distcp" in out["files"], out["files"]


def test_mismatched_tensors_raise_on_every_rank_and_the_group_survives(tmp_path):
    for rank, out in enumerate(run_ranks("bad_input", 2, tmp_path)):
        for case in ("shape", "dtype"):
            assert "ranks passed tensors of different shapes or dtypes" in out[case], out[case]
            assert f"rank {rank} passed" in out[case]
        assert out["after"] == [2.0, 2.0]
        assert "must be on a tpu device or the CPU, got meta" in out["meta"], out["meta"]


@pytest.mark.one_tier("a process failure seen through Gloo's transport")
def test_a_rank_that_dies_makes_the_others_raise(tmp_path):
    code = (
        "import os, sys, datetime, torch, torch.distributed as dist, torchtpu\n"
        "rank = int(sys.argv[1])\n"
        "os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=sys.argv[2])\n"
        "torch.tpu.set_device(rank)\n"
        "dist.init_process_group('tpu_dist', rank=rank, world_size=2,\n"
        "                        timeout=datetime.timedelta(seconds=20))\n"
        "if rank == 1:\n"
        "    os._exit(3)\n"
        "try:\n"
        "    dist.all_reduce(torch.ones(4, device='tpu:0'))\n"
        "except RuntimeError as e:\n"
        "    print('RAISED', str(e).splitlines()[0])\n")
    port = str(free_port())
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r), port], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
    out0, _ = procs[0].communicate(timeout=120)
    procs[1].communicate(timeout=120)
    assert procs[1].returncode == 3
    assert "RAISED" in out0, out0


@pytest.mark.parametrize("chip,chips,link,wraparound", [
    ("v5e", 4, 9e10, False), ("v5e", 16, 9e10, True), ("v6e", 8, 1.8e11, False),
    ("v5p", 4, 1.8e11, True), ("v4", 2, 9e10, False), ("v7", 64, 1.8e11, True)])
def test_the_ici_model_is_the_ring_formula(chip, chips, link, wraparound):
    """All-reduce and all-gather of 64 MiB: the bidirectional-ring formulas of "How to Scale
    Your Model" with the per-link bandwidths it gives (one way at W / 2 without a wraparound
    link), never below the latency of the hops (1 us each)."""
    nbytes = 64 * 2**20
    w = link if wraparound else link / 2
    hops = chips / 2 if wraparound else chips - 1
    share = (chips - 1) / chips
    for kind, factor in (("all_reduce", 2), ("all_gather", 1)):
        torchtpu.metrics.reset()
        torchtpu._C.charge_collective(kind, float(nbytes), chips)
        est = torchtpu.metrics.estimate(chip=chip)
        expected = max(hops * 1e-6, factor * share * nbytes / w)
        assert est["ici_time_s"] == pytest.approx(expected, rel=1e-9), kind
        assert est["launches"] == 1 and est["launches_bound_by"] == {"ici": 1}


@pytest.mark.one_tier("the examples' launch under torchrun and their reports; DDP and FSDP2 "
                     "training in fused eager is tested by "
                     "test_ddp_fsdp2_and_tensor_parallel_train_like_one_cpu_process")
@pytest.mark.parametrize("example", ["train_ddp.py", "train_fsdp.py"])
def test_the_examples_train_under_torchrun(example):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", example)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", str(free_port()), path, "--steps", "5"],
                          capture_output=True, text=True, timeout=300, env=env)
    # (or a rank aborted at exit after its report: conftest's EXIT_ABORT; the reports are checked)
    assert proc.returncode == 0 or aborted_at_exit(proc.returncode, proc.stderr), proc.stderr[-3000:]
    # Each rank writes its report in one write() (atomic on a pipe), so lines cannot interleave; a
    # run-together pair would fail here, as it did before the example wrote its line in one call.
    reports = [l for l in proc.stdout.splitlines() if l.startswith("[rank ")]
    assert len(reports) == 2 and all("ICI" in r for r in reports), proc.stdout
    assert "on tpu:0" in reports[0] + reports[1] and "on tpu:1" in reports[0] + reports[1]
    # (the example exits with 1 when it did not: conftest's aborted_at_exit does not take that
    # for an abort at exit; checked here from the reports as well)
    for r in reports:
        first, last = map(float, re.search(r"loss (\S+) -> (\S+);", r).groups())
        assert last < first, r


@pytest.mark.one_tier("the rendezvous and transport between processes; the collectives on device "
                     "tensors are tested in every mode")
def test_two_nodes_meet_through_torchruns_rendezvous():
    """Two "machines" (two torchrun agents on 127.0.0.1, one process each) find each other through
    torchrun's c10d rendezvous over TCP and train the DDP example together."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_ddp.py")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)))
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                               "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                               "--rdzv-endpoint", endpoint, "--rdzv-id", "two-nodes",
                               path, "--steps", "8"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outputs = []
    for node in nodes:
        try:
            out, err = node.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for n in nodes:
                n.kill()
            raise
        assert node.returncode == 0 or aborted_at_exit(node.returncode, err), err[-3000:]
        outputs.append([l for l in out.splitlines() if l.startswith("[rank ")])
    # one rank per node, each on its node's tpu:0, ranks 0 and 1 of one group of two
    assert all(len(lines) == 1 for lines in outputs), outputs
    lines = sorted(l for lines in outputs for l in lines)
    assert lines[0].startswith("[rank 0/2 on tpu:0, DDP]"), lines
    assert lines[1].startswith("[rank 1/2 on tpu:0, DDP]"), lines


@pytest.mark.parametrize("how", ["own stream", "own stream, waited", "own stream, event waited",
                                 "compute stream"])
def test_a_collective_on_its_own_stream_hides_behind_the_compute_of_the_others(how, no_loop_detection):
    """The ICI runs beside the TensorCore (sim/Ledger.h): a collective on a stream of its own
    overlaps the compute issued after it on the other streams, until they wait for it. (It
    compares the launches of two runs of the same matmuls, which loop detection would cut at
    other places: its window is kept across runs.)"""
    from torchtpu import _C

    x = torch.randn(512, 512, device="tpu")
    torchtpu.sync()
    torchtpu.metrics.reset()
    for _ in range(8):
        y = x @ x
    torchtpu.sync()
    compute = {chip: torchtpu.metrics.estimate(chip=chip)["device_time_s"] for chip in ("v5e", "v6e")}

    torchtpu.metrics.reset()
    side = torch.tpu.Stream() if how.startswith("own") else torch.tpu.current_stream()
    with torch.tpu.stream(side):
        flight = _C.charge_collective("all_reduce", float(16 << 20), 4)
        done = torch.tpu.Event()
        done.record()
    if how == "own stream, waited":
        _C.collective_waited(flight)  # Work.wait(): the current stream waits for it
    elif how == "own stream, event waited":
        torch.tpu.current_stream().wait_event(done)
    for _ in range(8):
        y = x @ x
    torchtpu.sync()
    for chip in ("v5e", "v6e"):
        est = torchtpu.metrics.estimate(chip=chip)
        ici = est["ici_time_s"]
        assert ici > 0 and est["device_time_s"] == pytest.approx(compute[chip] + est["ici_time_s"]
                                                                 + est["launch_us"] * 1e-6, rel=1e-9)
        expected = min(ici, compute[chip]) if how == "own stream" else 0.0
        assert est["ici_hidden_s"] == pytest.approx(expected, rel=1e-9, abs=1e-15), (how, chip)
        assert est["parallel_time_s"] == pytest.approx(est["device_time_s"] - expected, rel=1e-9)
    del y
