"""torch.save / torch.load with tpu tensors, storages and modules, and map_location both ways."""
import io

import torch


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_tensor_keeps_device_and_values():
    x = torch.randn(4, 5, device="tpu:1")
    y = roundtrip(x)
    assert y.device == torch.device("tpu:1")
    assert torch.equal(y.cpu(), x.cpu())


def test_map_location_tpu_to_cpu_and_back():
    x = torch.randn(3, 3, device="tpu")
    on_cpu = roundtrip(x, map_location="cpu")
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, x.cpu())
    c = torch.arange(10, dtype=torch.int32)
    on_tpu = roundtrip(c, map_location="tpu:2")
    assert on_tpu.device == torch.device("tpu:2") and torch.equal(on_tpu.cpu(), c)
    moved = roundtrip(x, map_location={"tpu:0": "tpu:3"})
    assert moved.device == torch.device("tpu:3")
    dev = roundtrip(x, map_location=torch.device("tpu", 1))
    assert dev.device == torch.device("tpu:1")


def test_views_share_storage_after_load():
    base = torch.arange(12.0, device="tpu").view(3, 4)
    view = base[:, 1]
    b, v = roundtrip([base, view])
    assert v.device.type == "tpu"
    b.add_(100)  # a write through the base shows in the view
    assert torch.equal(v.cpu(), torch.tensor([101.0, 105.0, 109.0]))


def test_module_state_dict():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("tpu")
    state = roundtrip(model.state_dict())
    assert all(t.device.type == "tpu" for t in state.values())
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    fresh.load_state_dict(roundtrip(model.state_dict(), map_location="cpu"))
    x = torch.randn(5, 4)
    assert torch.allclose(fresh(x), model(x.to("tpu")).cpu())


def test_untyped_storage_roundtrip():
    s = torch.tensor([1, 2, 3], dtype=torch.uint8, device="tpu").untyped_storage()
    loaded = roundtrip(s)
    assert loaded.device.type == "tpu" and loaded.tolist() == [1, 2, 3]
