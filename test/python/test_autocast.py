"""Mixed precision on "tpu": torch.autocast with PyTorch's autocast policy (the lists CUDA uses)
and torch.amp.GradScaler, against the same on the CPU."""
import copy

import pytest
import torch
import torchtpu


def test_default_dtype_is_bfloat16_and_the_policy_is_cudas():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    x, w = torch.randn(4, 8, device="tpu"), torch.randn(16, 8, device="tpu")
    with torch.autocast("tpu"):
        y = torch.nn.functional.linear(x, w)   # lower precision
        s = torch.softmax(y, -1)               # float32
        p = torch.addcmul(x, x.bfloat16(), x)  # promote: the widest input
    assert (y.dtype, s.dtype, p.dtype) == (torch.bfloat16, torch.float32, torch.float32)
    with torch.autocast("tpu", dtype=torch.float16):
        assert torch.mm(x, w.t()).dtype == torch.float16
    assert torch.mm(x, w.t()).dtype == torch.float32  # outside the region


def test_autocast_matches_the_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 10))
    x = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
    tpu = copy.deepcopy(model).to("tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = tpu(x.to("tpu"))
    assert got.dtype == expected.dtype == torch.bfloat16
    # bf16 operands, float32 accumulation on both sides (equal today; the default bf16
    # tolerance leaves room for a different summation order)
    torch.testing.assert_close(got.cpu(), expected)


def amp_training(device, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 12)
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(steps)]
    for x, t in data:
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(x.to(device))
        loss = torch.nn.functional.mse_loss(out.float(), t.to(device))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return model, scaler


def test_grad_scaler_training_matches_the_cpu_with_no_fallback():
    torchtpu.metrics.reset()
    tpu_model, tpu_scaler = amp_training("tpu")
    cpu_model, cpu_scaler = amp_training("cpu")
    assert tpu_scaler.get_scale() == cpu_scaler.get_scale()
    for a, b in zip(tpu_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach())  # float32 default tolerance
    assert torchtpu.metrics.fallbacks() == {}


def test_grad_scaler_skips_a_step_with_inf_gradients():
    model = torch.nn.Linear(4, 4).to("tpu")
    before = model.weight.detach().cpu().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu", init_scale=1024.0)
    scaler.scale(model(torch.randn(2, 4, device="tpu")).sum()).backward()
    model.weight.grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    assert torch.equal(model.weight.detach().cpu(), before)


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p = torch.rand(4, device="tpu")
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
        torch.nn.functional.binary_cross_entropy(p, torch.rand(4, device="tpu"))
