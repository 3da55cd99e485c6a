"""torch._assert_async on "tpu" (aten::_assert_async and its .msg overload: the VPU executor,
OpTraits' "_assert_async" row). TorchTitan's RoPE checks its positions with it on every forward
(torchtitan/models/common/rope.py); it went through the CPU fallback. It runs natively in every
eager mode, checked at the call after the work it depends on (CUDA's kernel asserts on the
device and the error surfaces later; the CPU's checks at once): a true condition passes, a false
one raises the CPU's error with the caller's message, and nothing falls back."""
import pytest
import torch

import torchtpu
import torchtpu.metrics


@pytest.fixture(params=["strict", "debug", "fused"])
def mode(request):
    previous_mode, previous_fallback = torchtpu.get_eager_mode(), torchtpu.get_fallback_mode()
    torchtpu.set_eager_mode(request.param)
    torchtpu.set_fallback_mode("error")
    yield request.param
    torchtpu.set_eager_mode(previous_mode)
    torchtpu.set_fallback_mode(previous_fallback)


def _raised(fn):
    try:
        fn()
        torch.tpu.synchronize()
    except RuntimeError as e:
        return str(e)
    return None


def test_assert_async_passes_and_fails_as_the_cpu(mode):
    torchtpu.metrics.reset()
    positions = torch.arange(8).repeat(2)
    for device in ("cpu", "tpu"):
        p = positions.to(device)
        # computed on the device first (in fused eager: pending when the check runs)
        ok, bad = torch.all(p * 2 <= 14), torch.all(p + 1 <= 7)
        assert _raised(lambda: torch._assert_async(ok, "position_ids exceed 7")) is None
        assert _raised(lambda: torch._assert_async(ok)) is None
        assert _raised(lambda: torch._assert_async(bad, "position_ids exceed 7")) == \
            "position_ids exceed 7"
        assert _raised(lambda: torch._assert_async(bad)) == \
            "Expected Tensor with single nonzero value, but got zero"
        # the CPU's checks of the argument, too
        assert "more than one value" in _raised(lambda: torch._assert_async(p, "x"))
    native = torchtpu.metrics.native_ops()
    assert native.get("aten::_assert_async.msg", 0) >= 3 and native.get("aten::_assert_async", 0) >= 2
    assert torchtpu.metrics.fallbacks() == {}


def test_assert_async_sees_the_values_of_pending_work(mode):
    x = torch.zeros(4, device="tpu")
    x.add_(1.0)  # recorded in fused eager, not yet run
    assert _raised(lambda: torch._assert_async(torch.all(x == 1.0), "stale")) is None
    x.sub_(1.0)
    assert _raised(lambda: torch._assert_async(torch.all(x == 1.0), "sees the update")) == \
        "sees the update"
