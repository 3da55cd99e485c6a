"""The tpu generator's state (docs/runtime.md, "Random numbers"): 16 bytes, CUDA's layout (seed,
then offset: the 32-bit words drawn since the seed), over the CPU's Mersenne Twister. Round trips
with the cached normal samples, the CPU's numbers kept, O(1) restores of states handed out,
fork_rng, activation checkpointing, compiled graphs, and DTensor's OffsetBasedRNGTracker (FSDP2's
meta-device recipe on 2 ranks). Run as a script, this file is the rank process of that test."""
import math
import os
import time

import pytest
import torch

import torchtpu

MODES = ["strict", "debug", "fused"]


def seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    assert state.dtype == torch.uint8 and state.numel() == 16
    return int(state[:8].view(torch.uint64).item()), int(state[8:].view(torch.int64).item())


def state_of(seed: int, offset: int) -> torch.Tensor:
    return torch.tensor([seed, offset], dtype=torch.int64).view(torch.uint8)


# ---------------------------------------------------------------------------------------------
# Tests (the rank process's code is at the end of the file)


@pytest.fixture(params=MODES)
def mode(request):
    torchtpu.set_eager_mode(request.param)
    return request.param


def test_the_state_is_seed_and_offset_as_dtensor_reads_it():
    from torch.distributed.tensor._random import _PhiloxState
    torch.tpu.init()
    torch.manual_seed(1234)
    state = torch.tpu.get_rng_state()
    assert seed_and_offset(state) == (1234, 0)
    torch.rand(10, device="tpu")  # float32: one 32-bit word an element
    torch.randn(16, dtype=torch.float64, device="tpu")  # float64: two words an element
    philox = _PhiloxState(torch.tpu.get_rng_state())
    assert int(philox.seed.item()) == 1234 and int(philox.offset.item()) == 10 + 32
    assert torch.tpu.initial_seed() == 1234
    # Any seed PyTorch makes (torch.seed(): 64 bits) is kept whole.
    big = torch.seed()
    assert seed_and_offset(torch.tpu.get_rng_state())[0] == big
    assert len(torch.tpu.get_rng_state_all()) == torch.tpu.device_count()


def test_round_trips_restore_the_stream_and_the_cached_normal_sample(mode):
    torch.manual_seed(21)
    torch.randn(3, device="tpu")  # fewer than 16: the CPU's Box-Muller keeps a sample
    state = torch.tpu.get_rng_state()
    drawn = torch.randn(5, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.randn(5, device="tpu").cpu(), drawn)
    # ... which is what the CPU draws, kept sample first.
    torch.manual_seed(21)
    torch.randn(3)
    assert torch.equal(torch.randn(5), drawn)
    # A state of the default generator set into another generator, and into another device.
    g = torch.Generator(device="tpu")
    g.set_state(state)
    assert torch.equal(torch.randn(5, device="tpu", generator=g).cpu(), drawn)
    torch.tpu.set_rng_state(state, 1)
    assert torch.equal(torch.randn(5, device="tpu:1").cpu(), drawn)
    assert torch.equal(g.get_state(), torch.tpu.get_rng_state(1))


def test_a_seed_and_offset_never_handed_out_gives_the_cpus_words_from_there(mode):
    # What DTensor's tracker does: moves the offset of a state and sets it.
    torch.manual_seed(7)
    words = torch.rand(5000)
    start = seed_and_offset(torch.tpu.get_rng_state())
    torch.tpu.manual_seed(7)
    torch.tpu.set_rng_state(state_of(7, 3001))
    assert torch.equal(torch.rand(999, device="tpu").cpu(), words[3001:4000])
    assert seed_and_offset(torch.tpu.get_rng_state()) == (7, 4000)
    torch.tpu.set_rng_state(state_of(7, 17))  # back, before every snapshot but the seed's
    assert torch.equal(torch.rand(10, device="tpu").cpu(), words[17:27])
    # A seed no state was handed out for: from its seeded engine.
    torch.manual_seed(987654)
    fresh = torch.rand(700)
    torch.tpu.set_rng_state(state_of(987654, 650))
    assert torch.equal(torch.rand(50, device="tpu").cpu(), fresh[650:])
    assert start[0] == 7


def test_states_in_the_cpus_format_are_taken_and_found_on_their_seeds_sequence():
    cpu = torch.Generator().manual_seed(11)
    torch.rand(2000, generator=cpu)
    cpu_state = cpu.get_state()
    g = torch.Generator(device="tpu")
    g.set_state(cpu_state)
    assert seed_and_offset(g.get_state()) == (11, 2000)
    assert torch.equal(torch.rand(20, device="tpu", generator=g).cpu(),
                       torch.rand(20, generator=cpu))
    torch.tpu.set_rng_state(torch.get_rng_state())  # the CPU's default generator's
    assert torch.equal(torch.rand(8, device="tpu").cpu(), torch.rand(8))


def test_bad_states_are_refused_with_the_formats_named():
    with pytest.raises(RuntimeError, match="16 bytes .*seed and offset"):
        torch.tpu.set_rng_state(torch.zeros(20, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="offset .* cannot be negative"):
        torch.tpu.set_rng_state(state_of(3, -4))
    # graphsafe states: refused, as by the CPU generator it draws like.
    with pytest.raises(NotImplementedError):
        torch.Generator(device="tpu").graphsafe_get_state()


def test_restoring_a_state_is_a_copy_however_many_words_were_drawn_since():
    torch.tpu.init()
    torch.manual_seed(5)
    torch.rand(10**6, device="tpu")
    state = torch.tpu.get_rng_state()
    assert seed_and_offset(state) == (5, 10**6)
    after = torch.rand(100, device="tpu").cpu()
    torch.rand(10**7, device="tpu")  # replaying these words would take about 5 ms
    t0 = time.perf_counter()
    torch.tpu.set_rng_state(state)
    restore = time.perf_counter() - t0
    assert torch.equal(torch.rand(100, device="tpu").cpu(), after)
    # A copy: microseconds (docs/runtime.md); the bound leaves room for a loaded host.
    assert restore < 2e-3, f"restore took {restore * 1e6:.0f} us"


def test_fork_rng_restores_the_state(mode):
    torch.manual_seed(0)
    with torch.random.fork_rng(devices=[0], device_type="tpu"):
        torch.nn.functional.dropout(torch.ones(3000, device="tpu"), 0.5)
        torch.randn(7, device="tpu")
    after = torch.randn(5, device="tpu").cpu()
    torch.manual_seed(0)
    assert torch.equal(torch.randn(5, device="tpu").cpu(), after)
    t0 = time.perf_counter()
    for _ in range(100):
        with torch.random.fork_rng(devices=[0], device_type="tpu"):
            pass
    assert (time.perf_counter() - t0) / 100 < 1e-3


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_the_same_dropout_masks(mode, reentrant):
    from torch.utils.checkpoint import checkpoint
    masks = []

    def block(x, w):
        y = torch.nn.functional.dropout(x @ w, 0.5, training=True)
        masks.append((y == 0).cpu())
        return torch.tanh(y)

    def run(use_checkpoint):
        torch.manual_seed(3)
        w = torch.randn(64, 64, device="tpu", requires_grad=True)
        x = torch.randn(32, 64, device="tpu", requires_grad=True)
        out = (checkpoint(block, x, w, use_reentrant=reentrant) if use_checkpoint
               else block(x, w))
        out.sum().backward()
        return w.grad.cpu(), x.grad.cpu()

    plain = run(False)
    del masks[:]
    checkpointed = run(True)
    assert len(masks) == 2 and torch.equal(masks[0], masks[1])
    assert 0.3 < masks[0].float().mean() < 0.7
    for a, b in zip(plain, checkpointed):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_compiled_graphs_draw_as_eager_and_states_restore_around_them():
    torchtpu.set_eager_mode("strict")

    def f(x):
        return torch.nn.functional.dropout(x, 0.5) + torch.rand_like(x)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n in (40, 57):  # the second size: another bucket, priced with the state restored
        x = torch.ones(n, 8, device="tpu")
        torch.manual_seed(9)
        eager = f(x).cpu()
        eager_state = torch.tpu.get_rng_state()
        torch.manual_seed(9)
        before = torch.tpu.get_rng_state()
        out = compiled(x).cpu()
        assert torch.equal(out, eager)
        assert torch.equal(torch.tpu.get_rng_state(), eager_state)
        torch.tpu.set_rng_state(before)
        assert torch.equal(compiled(x).cpu(), eager)


@pytest.mark.not_in_debug_tier("rank processes (as test_distributed.py's)")
def test_fsdp2_meta_init_on_two_ranks_draws_the_cpus_numbers_at_the_trackers_offsets(
        tmp_path):
    from test_distributed import run_ranks
    results = run_ranks("dtensor_init", 2, tmp_path, child=os.path.abspath(__file__))
    # Every rank gathers the same parameters and ends at the same state.
    assert results[0] == {**results[1], "rank": 0}
    out = results[0]
    # nn.Linear(16, 8): each rank's shard of 64 weights (and of 4 biases) starts at its
    # offset, so the whole is the CPU's Linear made after the same seed.
    torch.manual_seed(0)
    first = torch.nn.Linear(16, 8)
    assert torch.tensor(out["0.weight"]).equal(first.weight.detach())
    assert torch.tensor(out["0.bias"]).equal(first.bias.detach())
    # nn.Linear(8, 6) (weight and bias bounds 1/sqrt(8)): from offset 136; its bias's shards
    # of 3 start 4 words apart (the tracker rounds offsets to multiples of 4, as CUDA's).
    torch.manual_seed(0)
    bound = 1 / math.sqrt(8)
    words = torch.empty(191).uniform_(-bound, bound)
    assert torch.tensor(out["1.weight"]).equal(words[136:184].view(6, 8))
    assert torch.tensor(out["1.bias"]).equal(torch.cat([words[184:187], words[188:191]]))
    assert out["offset_after_init"] == 184 + 8
    # A DTensor's normal_ on Shard(0) (16 elements a rank) and a Replicate one.
    torch.manual_seed(1)
    assert torch.tensor(out["sharded_normal"]).equal(torch.randn(8, 4))
    assert torch.tensor(out["replicated_uniform"]).equal(torch.rand(3, 4))
    assert out["state_seed"] == 1 and out["offset_after_dtensor_ops"] == 32 + 12


# ---------------------------------------------------------------------------------------------
# The rank process (run by run_ranks of test_distributed.py)


def dtensor_init(rank, size, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("tpu", (size,))
    torch.manual_seed(0)
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Linear(8, 6))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="tpu")
    for layer in model:
        layer.reset_parameters()
    out = {name: p.full_tensor().cpu().tolist() for name, p in model.named_parameters()}
    out["offset_after_init"] = seed_and_offset(torch.tpu.get_rng_state())[1]
    torch.manual_seed(1)
    sharded = distribute_tensor(torch.empty(8, 4, device=dev), mesh, [Shard(0)]).normal_()
    out["sharded_normal"] = sharded.full_tensor().cpu().tolist()
    replicated = distribute_tensor(torch.empty(3, 4, device=dev), mesh, [Replicate()]).uniform_()
    out["replicated_uniform"] = replicated.full_tensor().cpu().tolist()
    out["state_seed"], out["offset_after_dtensor_ops"] = seed_and_offset(torch.tpu.get_rng_state())
    out["rank"] = rank
    return out


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "helpers"))
    from distributed_child import run_rank

    run_rank({"dtensor_init": dtensor_init}, where=False)
