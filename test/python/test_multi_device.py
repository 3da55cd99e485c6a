"""Several simulated devices: placement, cross-device copies, and device-mismatch errors."""
import pytest
import torch


def test_ops_stay_on_their_device():
    x = torch.randn(4, 4, device="tpu:1")
    y = (x @ x.t()).relu() + 1
    assert y.device == torch.device("tpu:1")
    xc = x.cpu()
    assert torch.allclose(y.cpu(), (xc @ xc.t()).relu() + 1)


def test_cross_device_copies():
    x = torch.randn(3, 5, device="tpu:0")
    y = x.to("tpu:3")
    assert y.device == torch.device("tpu:3") and torch.equal(y.cpu(), x.cpu())
    z = torch.empty(5, 3, device="tpu:2")
    z.copy_(x.t())
    assert torch.equal(z.cpu(), x.cpu().t())


def test_module_on_second_device_trains():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).to("tpu:1")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, 3, device="tpu:1"), torch.randn(8, 1, device="tpu:1")
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    assert model.weight.grad.device == torch.device("tpu:1")
    assert model.weight.device == torch.device("tpu:1")


@pytest.mark.parametrize("other", ["tpu:1", "cpu"])
def test_mixing_devices_raises_like_cuda(other):
    a = torch.ones(4, device="tpu:0")
    b = torch.ones(4, device=other)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([a, b])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.nn.functional.linear(torch.ones(2, 4, device="tpu:0"), torch.ones(3, 4, device=other))


def test_cpu_index_tensors_work_for_advanced_indexing_like_cuda():
    # Found by the model zoo (sam_vision_model, vilt): x[idx] with idx on the CPU works on CUDA
    # (PyTorch moves the indices), so it must on tpu; index_select keeps CUDA's same-device rule.
    x = torch.arange(12.0).view(3, 4)
    i, j = torch.tensor([2, 0]), torch.tensor([1, 3])
    xt = x.to("tpu")
    assert torch.equal(xt[i].cpu(), x[i]) and torch.equal(xt[i, j].cpu(), x[i, j])
    xt[i, j] = torch.tensor([7.0, 8.0], device="tpu")
    x[i, j] = torch.tensor([7.0, 8.0])
    assert torch.equal(xt.cpu(), x)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        xt.index_select(0, i)


def test_zero_dim_cpu_tensor_is_a_scalar():
    a = torch.ones(4, device="tpu:0")
    out = a * torch.tensor(3.0) + torch.tensor(1.0)
    assert out.device == torch.device("tpu:0")
    assert torch.equal(out.cpu(), torch.full((4,), 4.0))
