"""The simulated HBM allocator seen from Python: stats, caching, out-of-memory."""
import pytest
import torch
import torchtpu

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(autouse=True)
def _fresh():
    # These run in every eager mode: in fused eager, tensors get memory when their region runs,
    # but reading the statistics first gives memory to every pending tensor (as CUDA counts
    # every live tensor), and an op whose memory would not fit runs at once and raises.
    torch.tpu.empty_cache()
    torch.tpu.reset_peak_memory_stats()
    yield
    torch.tpu.empty_cache()


def test_allocated_reserved_and_peak():
    base = torch.tpu.memory_allocated()
    a = torch.empty(3 * MiB // 4, device="tpu")   # 3 MiB -> rounded to 4 MiB (2 MiB classes)
    b = torch.empty(100, device="tpu")            # 400 B -> 512 B
    assert torch.tpu.memory_allocated() - base == 4 * MiB + 512
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    del a
    assert torch.tpu.memory_allocated() - base == 512
    assert torch.tpu.max_memory_allocated() - base == 4 * MiB + 512
    reserved = torch.tpu.memory_reserved()
    assert reserved >= 4 * MiB, "freed blocks stay cached"
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() < reserved
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    del b


def test_cached_block_is_reused():
    a = torch.empty(1000, device="tpu")
    ptr = a.data_ptr()
    del a
    b = torch.empty(1001, device="tpu")  # same 4 KiB class
    assert b.data_ptr() == ptr
    assert torch.tpu.memory_stats()["num_device_alloc"] >= 1


def test_memory_is_per_device():
    before = [torch.tpu.memory_allocated(i) for i in range(2)]
    x = torch.empty(MiB, device="tpu:1")
    assert torch.tpu.memory_allocated(1) - before[1] == 4 * MiB
    assert torch.tpu.memory_allocated(0) == before[0]
    del x


def test_mem_get_info():
    free, total = torch.tpu.mem_get_info()
    assert total == 16 * GiB
    x = torch.empty(64 * MiB // 4, device="tpu")
    free2, _ = torch.tpu.mem_get_info()
    assert free - free2 == 64 * MiB
    del x


def test_out_of_memory_keeps_tensors_and_recovers():
    # Untouched host pages cost nothing, so the real 16 GiB of a v5e can be filled here.
    keep = torch.arange(1000, dtype=torch.float32, device="tpu")
    big = torch.empty(10 * GiB, dtype=torch.uint8, device="tpu")
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(8 * GiB, dtype=torch.uint8, device="tpu")
    message = str(info.value)
    assert "TPU out of memory. Tried to allocate 8.00 GiB" in message
    assert "total capacity of 16.00 GiB" in message
    assert "10.00 GiB is allocated by PyTorch" in message
    assert "TORCHTPU_HBM_BYTES" in message  # says what to do
    assert isinstance(info.value, RuntimeError)
    assert torch.equal(keep.cpu(), torch.arange(1000, dtype=torch.float32))
    fits = torch.empty(4 * GiB, dtype=torch.uint8, device="tpu")
    assert fits.device.type == "tpu"
    assert torch.tpu.memory_stats()["num_ooms"] >= 1
    del big, fits


def test_out_of_memory_at_the_configured_capacity():
    from conftest import run_python

    out = run_python(
        """
        import torch, torchtpu
        a = torch.ones(10 << 20, dtype=torch.uint8, device="tpu")   # 10 MiB of 16 MiB
        try:
            torch.ones(8 << 20, dtype=torch.uint8, device="tpu")
            print("no error")
        except torch.OutOfMemoryError as e:
            print("oom", "16.00 MiB" in str(e))
        b = torch.ones(4 << 20, dtype=torch.uint8, device="tpu")
        print(int(a.sum().item()), int(b.sum().item()))
        """,
        env={"TORCHTPU_HBM_BYTES": str(16 << 20), "TORCHTPU_EAGER_MODE": torchtpu.get_eager_mode()},
    ).stdout.split()
    assert out == ["oom", "True", str(10 << 20), str(4 << 20)]
