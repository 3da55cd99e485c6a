"""Random numbers on the device: reproducible, seeded like the CPU, with state round trips."""
import pytest
import torch


def test_manual_seed_reproduces():
    torch.manual_seed(123)
    a = torch.randn(100, device="tpu").cpu()
    torch.manual_seed(123)
    b = torch.randn(100, device="tpu").cpu()
    assert torch.equal(a, b)
    c = torch.randn(100, device="tpu").cpu()
    assert not torch.equal(a, c)


@pytest.mark.parametrize("fn", [
    lambda d: torch.randn(64, device=d),
    lambda d: torch.rand(8, 8, device=d),
    lambda d: torch.empty(50, device=d).normal_(2.0, 3.0),
    lambda d: torch.empty(50, device=d).uniform_(-1, 1),
    lambda d: torch.empty(50, device=d).bernoulli_(0.3),
    lambda d: torch.empty(50, dtype=torch.int64, device=d).random_(0, 10),
    lambda d: torch.randint(0, 100, (20,), device=d),
    lambda d: torch.empty(20, device=d).exponential_(),
    lambda d: torch.randn(16, dtype=torch.float64, device=d),
    lambda d: torch.randn(16, dtype=torch.bfloat16, device=d),
])
def test_same_numbers_as_cpu_for_the_same_seed(fn):
    # The device generator is a Mersenne Twister seeded like PyTorch's CPU generator, so a
    # seed gives the same numbers on both: differential testing of random code is possible.
    torch.manual_seed(7)
    cpu = fn("cpu")
    torch.manual_seed(7)
    tpu = fn("tpu")
    assert tpu.device.type == "tpu"
    assert torch.equal(tpu.cpu(), cpu)


def test_rng_state_roundtrip():
    state = torch.tpu.get_rng_state()
    a = torch.rand(10, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    b = torch.rand(10, device="tpu").cpu()
    assert torch.equal(a, b)
    states = torch.tpu.get_rng_state_all()
    assert len(states) == torch.tpu.device_count()
    assert state.dtype == torch.uint8


def test_devices_have_their_own_generators():
    torch.tpu.manual_seed_all(5)
    a = torch.randn(10, device="tpu:0").cpu()
    b = torch.randn(10, device="tpu:1").cpu()
    assert torch.equal(a, b), "same seed, separate streams"
    c = torch.randn(10, device="tpu:0").cpu()
    assert not torch.equal(a, c)
    torch.tpu.manual_seed(9)  # current device only
    assert torch.tpu.default_generators[0].initial_seed() == 9
    assert torch.tpu.default_generators[1].initial_seed() == 5


def test_explicit_generator():
    g = torch.Generator(device="tpu")
    assert g.device.type == "tpu"
    g.manual_seed(42)
    a = torch.randn(10, device="tpu", generator=g).cpu()
    g.manual_seed(42)
    b = torch.randn(10, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="device type"):
        torch.randn(3, device="tpu", generator=torch.Generator())


def test_fork_rng_restores_state():
    torch.manual_seed(0)
    with torch.random.fork_rng(device_type="tpu"):
        torch.randn(5, device="tpu")
    after = torch.randn(5, device="tpu").cpu()
    torch.manual_seed(0)
    assert torch.equal(torch.randn(5, device="tpu").cpu(), after)


def test_dropout_uses_the_device_generator():
    x = torch.ones(1000, device="tpu")
    torch.manual_seed(3)
    a = torch.nn.functional.dropout(x, 0.5).cpu()
    torch.manual_seed(3)
    b = torch.nn.functional.dropout(x, 0.5).cpu()
    assert torch.equal(a, b)
    assert 300 < int((a == 0).sum()) < 700


def test_randperm_through_the_fallback_uses_the_device_generator():
    torch.manual_seed(11)
    a = torch.randperm(20, device="tpu").cpu()
    torch.manual_seed(11)
    b = torch.randperm(20, device="tpu").cpu()
    assert torch.equal(a, b)
    assert sorted(a.tolist()) == list(range(20))


# Generator offsets (docs/cuda-parity.md, "Generator offsets"): the CPU generator refuses them
# ("CPU Generator does not use offset"), and so did the tpu one before.
@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_offset_counts_the_words_drawn_since_the_seed_and_set_offset_replays_from_there(mode):
    import torchtpu
    torchtpu.set_eager_mode(mode)
    g = torch.tpu.default_generators[0]
    torch.tpu.manual_seed(3)
    assert g.get_offset() == 0
    first = torch.rand(10, device="tpu")  # float32 uniform: one 32-bit word an element
    assert g.get_offset() == 10
    # Across many block updates of the engine (624 words each), dropout in between.
    torch.nn.functional.dropout(torch.ones(5000, device="tpu"), 0.5)
    middle = g.get_offset()
    assert middle > 10
    drawn = torch.randn(3000, device="tpu").cpu()
    end = g.get_offset()
    assert end > middle
    g.set_offset(middle)
    assert torch.equal(torch.randn(3000, device="tpu").cpu(), drawn)
    assert g.get_offset() == end
    g.set_offset(0)
    assert torch.equal(torch.rand(10, device="tpu").cpu(), first.cpu())
    # The module functions of CUDA's names, on the current device.
    torch.tpu._set_rng_state_offset(middle)
    assert torch.tpu._get_rng_state_offset() == middle
    assert torch.equal(torch.randn(3000, device="tpu").cpu(), drawn)


def test_offset_of_a_restored_state_and_of_a_state_not_drawn_from_its_seed():
    g = torch.Generator(device="tpu")
    g.manual_seed(11)
    torch.rand(2000, device="tpu", generator=g)
    state, offset = g.get_state(), g.get_offset()
    torch.rand(100_000, device="tpu", generator=g)
    g.set_state(state)
    assert g.get_offset() == offset
    assert g.clone_state().get_offset() == offset
    # A state in the CPU generator's format (which set_state takes too): its offset is found by
    # replaying from its seed.
    cpu = torch.Generator().manual_seed(11)
    torch.rand(2000, generator=cpu)
    cpu_state = cpu.get_state()
    g.set_state(cpu_state)
    assert g.get_offset() == offset
    assert torch.equal(g.get_state(), state)  # (seed, offset): test_rng_state.py
    # One whose words are not those of its seed's sequence (one bit flipped in the engine's words,
    # which follow the seed and position fields of the CPU's state format): get_offset cannot know
    # its offset and says so, and get_state hands it back in the CPU's format.
    forged = cpu_state.clone()
    forged[96] ^= 1  # the low byte of word 9 (the words are stored as 64-bit integers)
    g.set_state(forged)
    with pytest.raises(RuntimeError, match="not within .* words of its seed 11.*set_offset"):
        g.get_offset()
    assert torch.equal(g.get_state(), forged)
    g.set_offset(offset)
    assert g.get_offset() == offset
    assert torch.equal(g.get_state(), state)


def test_get_rng_state_runs_a_queued_manual_seed_first():
    # torch.manual_seed before the device starts is queued (as CUDA's); get_rng_state starts the
    # device and so reads the seeded state, as torch.cuda.get_rng_state does.
    from conftest import run_python
    out = run_python("""
        import torch, torchtpu
        torch.manual_seed(5)
        state = torch.tpu.get_rng_state()
        x = torch.rand(3, device="tpu").cpu()
        torch.manual_seed(5)
        print(torch.equal(state, torch.tpu.get_rng_state()), int(state[:8].view(torch.int64)))
        print(torch.equal(x, torch.rand(3, generator=torch.Generator().manual_seed(5))))
    """)
    assert out.stdout.split() == ["True", "5", "True"]
