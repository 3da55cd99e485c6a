"""Training loops on "tpu" against the same loops on the CPU (differential)."""
import copy

import pytest
import torch

# Today every float32 op on the device runs the CPU kernel (natively or through the fallback),
# so results agree to rounding; the tolerance below is PyTorch's float32 default for
# assert_close and leaves room for the simulated MXU numerics that later replace those kernels
# (docs/design.md 4.2: float32 matmuls at "highest" precision are accurate to about 1e-6 relative).
RTOL, ATOL = 1.3e-6, 1e-5


def train(model, opt_cls, device, steps=20, **opt_kwargs):
    torch.manual_seed(1)
    # A learnable task: labels from a fixed linear rule, so the loss must go down.
    rule = torch.randn(10, 3)
    inputs = [torch.randn(16, 10) for _ in range(steps)]
    data = [(x, (x @ rule).argmax(dim=1)) for x in inputs]
    model = model.to(device)
    opt = opt_cls(model.parameters(), **opt_kwargs)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


@pytest.mark.parametrize("opt_cls,kwargs", [
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (torch.optim.Adam, {"lr": 1e-2}),
    (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
])
def test_linear_classifier_matches_cpu(opt_cls, kwargs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    cpu_model, cpu_losses = train(copy.deepcopy(model), opt_cls, "cpu", **kwargs)
    tpu_model, tpu_losses = train(copy.deepcopy(model), opt_cls, "tpu", **kwargs)
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=RTOL, atol=ATOL)
    for p_cpu, p_tpu in zip(cpu_model.parameters(), tpu_model.parameters()):
        assert p_tpu.device.type == "tpu"
        torch.testing.assert_close(p_tpu.cpu(), p_cpu, rtol=RTOL, atol=ATOL)
    assert tpu_losses[-1] < tpu_losses[0]


def test_conv_batchnorm_dropout_step_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Dropout(0.2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 4),
    )
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    results = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        torch.manual_seed(5)  # same dropout mask: the device generator matches the CPU's
        loss = torch.nn.functional.cross_entropy(m(x.to(device)), y.to(device))
        loss.backward()
        grads = [p.grad.detach().cpu().clone() for p in m.parameters()]
        opt.step()
        results[device] = (loss.item(), grads, m[1].running_mean.cpu(),
                           [p.detach().cpu() for p in m.parameters()])
    torch.testing.assert_close(results["tpu"][0], results["cpu"][0], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(results["tpu"][1], results["cpu"][1], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(results["tpu"][2], results["cpu"][2], rtol=RTOL, atol=ATOL)
    # The conv bias feeds a batch norm, so its true gradient is 0 and both sides hold rounding
    # noise of either sign; Adam's first step moves a parameter by lr * sign(grad). After the
    # step the parameters can therefore differ by up to 2 * lr (lr = 1e-3).
    torch.testing.assert_close(results["tpu"][3], results["cpu"][3], rtol=0, atol=2e-3)


@pytest.mark.parametrize("impl", [{"foreach": False}, {"foreach": True}, {"fused": True}])
@pytest.mark.parametrize("opt_cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_optimizer_implementations_run_natively_and_match_cpu(opt_cls, impl):
    import torchtpu

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    extra = {"momentum": 0.9} if opt_cls is torch.optim.SGD else {}
    params = {}
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev)
        opt = opt_cls(m.parameters(), lr=0.01, **impl, **extra)
        torchtpu.metrics.reset()
        for _ in range(3):
            loss = torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if dev == "tpu":
            assert torchtpu.metrics.fallbacks() == {}
        params[dev] = [p.detach().cpu() for p in m.parameters()]
    torch.testing.assert_close(params["tpu"], params["cpu"], rtol=RTOL, atol=ATOL)
