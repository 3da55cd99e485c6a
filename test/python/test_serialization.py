"""torch.save / torch.load with tpu tensors, storages and modules, and map_location both ways;
the backend tensor metadata that goes with them (torch._utils.set_tensor_metadata)."""
import io

import torch
import torchtpu


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


# Backend tensor metadata (torch._utils.set_tensor_metadata / get_tensor_metadata: a PrivateUse1
# backend's c10::BackendMeta, api/BackendMeta.cpp). A tpu tensor kept none: set_tensor_metadata
# did nothing and get_tensor_metadata gave {}. What PyTorch's reference backend (OpenReg) keeps
# through its tests, tpu keeps: torch.save/load, a copy of the metadata to another tensor, fake
# tensors (also of a FunctionalTensor); and copy.deepcopy, as torch.save does.
_META = {"version_number": True, "format_number": True}


def test_tensor_metadata_set_on_a_tpu_tensor_survives_save_and_load():
    import torch._utils as tu

    t = torch.empty(3, 3, device="tpu")
    assert tu.get_tensor_metadata(t) == {}
    tu.set_tensor_metadata(t, {**_META, "user_key": False})
    assert tu.get_tensor_metadata(t) == {**_META, "user_key": False}  # (what was set, as set)
    loaded = roundtrip(t)
    assert loaded.device == t.device and tu.get_tensor_metadata(loaded) == {**_META, "user_key": False}
    state = roundtrip({"w": t, "b": torch.zeros(2, device="tpu:1")}, map_location="tpu:2")
    assert state["w"].device == torch.device("tpu:2")
    assert tu.get_tensor_metadata(state["w"]) == {**_META, "user_key": False}
    assert tu.get_tensor_metadata(state["b"]) == {}
    # On the CPU the keys mean nothing: they are dropped, as for the CPU's own tensors.
    assert tu.get_tensor_metadata(roundtrip(t, map_location="cpu")) == {}
    # With PyTorch's own bits (neg, conj) of the same tensor.
    z = torch.randn(4, dtype=torch.cfloat, device="tpu").conj()
    tu.set_tensor_metadata(z, _META)
    assert tu.get_tensor_metadata(roundtrip(z)) == {**_META, "conj": True}
    # Set again: replaced; an empty dict clears it.
    tu.set_tensor_metadata(t, {"format_number": True})
    assert tu.get_tensor_metadata(t) == {"format_number": True}
    tu.set_tensor_metadata(t, {})
    assert tu.get_tensor_metadata(t) == {}


def test_tensor_metadata_goes_with_detach_and_copies_to_another_tensor_not_with_new_results():
    import torch._utils as tu

    src, dst = torch.empty(3, 3, device="tpu"), torch.empty(3, 3, device="tpu")
    tu.set_tensor_metadata(src, _META)
    assert tu.get_tensor_metadata(src.detach()) == _META  # (the same TensorImpl's metadata)
    assert tu.get_tensor_metadata(src.clone()) == {}      # (a new tensor, as on every device)
    assert tu.get_tensor_metadata(dst) == {}
    torchtpu.copy_backend_meta(src, dst)  # (torch._C._copy_backend_meta in later torch)
    assert tu.get_tensor_metadata(dst) == _META
    torchtpu.copy_backend_meta(torch.empty(1, device="tpu"), dst)  # (a source without any)
    assert tu.get_tensor_metadata(dst) == _META


def test_tensor_metadata_survives_deepcopy_of_tensors_parameters_and_modules():
    import copy

    import torch._utils as tu

    t = torch.randn(3, 3, device="tpu", requires_grad=True)
    tu.set_tensor_metadata(t, _META)
    t2 = copy.deepcopy(t)
    assert tu.get_tensor_metadata(t2) == _META and t2.requires_grad
    assert torch.equal(t2.detach().cpu(), t.detach().cpu())
    layer = torch.nn.Linear(3, 2).to("tpu")
    tu.set_tensor_metadata(layer.weight, _META)
    assert tu.get_tensor_metadata(copy.deepcopy(layer).weight) == _META
    assert tu.get_tensor_metadata(copy.deepcopy(layer).bias) == {}
    cpu = torch.randn(2)
    assert tu.get_tensor_metadata(copy.deepcopy(cpu)) == {}


def test_tensor_metadata_is_propagated_to_fake_tensors():
    import torch._utils as tu
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    t = torch.empty(3, 3, device="tpu")
    tu.set_tensor_metadata(t, _META)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(t)
    assert isinstance(fake, FakeTensor) and fake.device == t.device
    assert tu.get_tensor_metadata(fake) == _META
    # A FunctionalTensor carries none itself; its fake tensor gets the inner tensor's.
    with FunctionalTensorMode():
        functional = FunctionalTensor.to_functional(t)
        assert tu.get_tensor_metadata(functional) == {}
        with FakeTensorMode() as mode:
            fake = mode.from_tensor(functional)
    assert isinstance(fake, FakeTensor) and tu.get_tensor_metadata(fake) == _META
    # What torch.compile traces with: Dynamo's fake inputs.
    seen = []

    def backend(gm, example_inputs):
        seen.extend(tu.get_tensor_metadata(n.meta["example_value"]) for n in gm.graph.nodes
                    if n.op == "placeholder")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(lambda a: a + 1, backend=backend, fullgraph=True)(t)
    torch._dynamo.reset()
    assert seen == [_META]
