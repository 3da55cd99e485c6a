"""Devices, streams and host memory as CUDA code uses them: "tpu" without an index is the current
device (streams, events, factories), the caching host allocator of pinned memory and its
counters, record_stream with CUDA's meaning."""
import pytest
import torch

import torchtpu


def test_tpu_without_an_index_is_the_current_device():
    # torch.Stream / torch.triu_indices raised "Invalid device index tpu:-1".
    with torch.tpu.device(1):
        s = torch.Stream(device="tpu")
        assert s.device_index == 1
        e = torch.Event(device="tpu")
        e.record(s)
        e.synchronize()
        assert e.query()
        t = torch.triu_indices(3, 3, device="tpu")
        assert t.device == torch.device("tpu", 1)
        assert torch.equal(t.cpu(), torch.triu_indices(3, 3))
        assert torch.equal(torch.tril_indices(4, 3, 1, device="tpu").cpu(), torch.tril_indices(4, 3, 1))
        assert torch.accelerator.current_stream(torch.device("tpu")).device_index == 1


def test_the_host_allocator_caches_pinned_memory_and_counts_it():
    # torch.accelerator.empty_host_cache() crashed the process when a tpu tensor existed.
    x = torch.ones(2, device="tpu")
    torch.accelerator.empty_host_cache()
    torch.tpu.reset_accumulated_host_memory_stats()
    before = torch.tpu.host_memory_stats()
    p = torch.arange(4096.0).pin_memory()
    assert p.is_pinned() and not torch.arange(3.0).is_pinned()
    y = p.to("tpu", non_blocking=True)
    assert torch.equal(y.cpu(), p)
    after = torch.tpu.host_memory_stats()
    assert after["active_requests.current"] == before["active_requests.current"] + 1
    assert after["num_host_alloc"] == before["num_host_alloc"] + 1
    del p
    q = torch.zeros(4096).pin_memory()  # the same size class: the cached block, no new host allocation
    assert torch.tpu.host_memory_stats()["num_host_alloc"] == after["num_host_alloc"]
    assert q.is_pinned() and q.sum().item() == 0
    del q
    torch.accelerator.empty_host_cache()
    emptied = torch.tpu.host_memory_stats()
    assert emptied["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert emptied["num_host_free"] >= before["num_host_free"] + 1
    del x


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_record_stream_is_native_with_cudas_meaning(mode):
    # record_stream went to the CPU fallback and failed ("Could not run 'aten::record_stream'").
    torchtpu.set_eager_mode(mode)  # (conftest restores the tier's mode)
    side = torch.tpu.Stream()
    x = torch.randn(256, 256, device="tpu")
    with torch.tpu.stream(side):
        side.wait_stream(torch.tpu.current_stream())
        y = x @ x  # made on the side stream, used on the main one
    torch.tpu.current_stream().wait_stream(side)
    y.record_stream(torch.tpu.current_stream())
    z = (y * 2).sum()
    del y  # its block is not reused while queued work still uses it
    w = torch.full((256, 256), 7.0, device="tpu")
    expect = ((x.cpu() @ x.cpu()) * 2).sum()
    # float32's default tolerance (it was rtol 1e-2, atol 0.1, with no reason given: ~34 on a sum
    # of ~3300, which passed a block whose reuse overwrote one element of y with w's 7.0): the
    # product at "highest" is PyTorch's CPU GEMM on the host aliases and the sum its CPU kernel,
    # measured max |tpu - cpu| 0 over 20 seeds in every mode.
    torch.testing.assert_close(z.cpu(), expect)
    assert w.sum().item() == 7.0 * 256 * 256
    assert "record_stream" not in torchtpu.metrics.fallbacks()
    with pytest.raises(RuntimeError, match="the stream is on tpu:1 but the tensor on tpu:0"):
        x.record_stream(torch.tpu.Stream(device=1))
