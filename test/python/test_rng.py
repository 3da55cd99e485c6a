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
