"""Autoload through the torch.backends entry point, and streams and events from Python."""
import pytest
import torch
from conftest import run_python


def test_plain_import_torch_autoloads_the_device():
    out = run_python("import torch; print(torch.accelerator.current_accelerator()); "
                     "print(torch.ones(2, device='tpu').device)").stdout.split()
    assert out == ["tpu", "tpu:0"]


def test_autoload_can_be_disabled_and_import_still_works():
    out = run_python(
        """
        import torch
        print(torch._C._get_privateuse1_backend_name())
        import torchtpu
        print(torch.accelerator.current_accelerator())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    ).stdout.split()
    assert out == ["privateuseone", "tpu"]


def test_importing_torchtpu_first():
    out = run_python("import torchtpu, torch; print(torch.tpu.device_count())").stdout.split()
    assert out == ["4"]


def test_stream_and_event_basics():
    s = torch.tpu.Stream()
    assert isinstance(s, torch.Stream) and s.device.type == "tpu" and s.stream_id != 0
    assert torch.Stream(device="tpu:1").device == torch.device("tpu:1")
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
    assert torch.tpu.current_stream() == torch.tpu.default_stream()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0.0


def test_elapsed_time_requires_timing():
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):  # torch checks this itself, as for CUDA
        a.elapsed_time(b)


def test_cross_stream_waits():
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    e = s1.record_event()
    s2.wait_event(e)
    s2.wait_stream(s1)
    s2.synchronize()
    assert s1.query() and s2.query()
    torch.tpu.synchronize()
    torch.accelerator.set_stream(s2)
    assert torch.accelerator.current_stream() == s2
