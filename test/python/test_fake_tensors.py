"""Fake tensors of tpu tensors describe the results the device gives (PyTorch's test_ops
TestFakeTensor compares the two for every OpInfo): the shapes and dtypes a FakeTensorMode computes
for a tpu call are the ones the real call returns."""
import pytest
import torch
import torchtpu
from torch._subclasses.fake_tensor import FakeTensorMode


def _real_and_fake(fn, args):
    real = fn(*args)
    with FakeTensorMode() as mode:
        fake = fn(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])
    return real, fake


def _geometry(results):
    return [(r.shape, r.dtype, r.device) for r in results]


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_in_inference_saves_per_channel_statistics_like_every_non_cpu_device(mode, dtype):
    # The CPU returns empty saved statistics in inference; PyTorch's meta function and
    # decomposition give every other device the running mean and inverse standard deviation, (C,)
    # each: tpu returned the CPU's (0,), so its fake tensors disagreed with its real ones.
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, generator=g).to(dtype)
    weight, bias = torch.randn(3, generator=g), torch.randn(3, generator=g)
    mean, var = torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5
    cpu = [x, weight, bias, mean, var]
    tpu = [t.to("tpu") for t in cpu]
    ops = {
        "native_batch_norm": lambda *a: torch.ops.aten.native_batch_norm(*a, False, 0.1, 1e-5),
        "_native_batch_norm_legit": lambda *a: torch.ops.aten._native_batch_norm_legit(
            *a, False, 0.1, 1e-5),
        "_native_batch_norm_legit_no_training": lambda *a: (
            torch.ops.aten._native_batch_norm_legit_no_training(*a, 0.1, 1e-5)),
    }
    for name, op in ops.items():
        real, fake = _real_and_fake(op, tpu)
        assert _geometry(real) == _geometry(fake), name
        want = op(*cpu)
        torch.testing.assert_close(real[0].cpu(), want[0], msg=name)
        # the statistics PyTorch's decomposition saves
        torch.testing.assert_close(real[1].cpu(), mean, msg=name)
        torch.testing.assert_close(real[2].cpu(), (var + 1e-5).rsqrt(), msg=name)
    # The out= overloads give the same (upstream test_out compares them with the functional).
    for name, op in (("native_batch_norm", torch.ops.aten.native_batch_norm.out),
                     ("_native_batch_norm_legit", torch.ops.aten._native_batch_norm_legit.out)):
        outs = [torch.empty(0, device="tpu", dtype=t.dtype) for t in ops[name](*tpu)]
        op(*tpu, False, 0.1, 1e-5, out=outs[0], save_mean=outs[1], save_invstd=outs[2])
        for got, want in zip(outs, ops[name](*tpu)):
            torch.testing.assert_close(got.cpu(), want.cpu(), msg=name)
    # Inference's backward reads the running statistics, not the saved ones: equal to the CPU's.
    xs = [x.float().clone().requires_grad_(), x.float().to("tpu").requires_grad_()]
    outs = [torch.nn.functional.batch_norm(xi, m, v, w, b, training=False)
            for xi, (m, v, w, b) in zip(xs, [(mean, var, weight, bias),
                                             tuple(t.to("tpu") for t in (mean, var, weight, bias))])]
    grad = torch.randn(outs[0].shape, generator=g)
    outs[0].backward(grad)
    outs[1].backward(grad.to("tpu"))
    torch.testing.assert_close(xs[1].grad.cpu(), xs[0].grad)
    torchtpu.sync()


def test_fake_tensors_of_tpu_behave_as_those_of_the_cpu_where_the_cpu_differs_from_its_real_run():
    # Two of upstream TestFakeTensor's failures on tpu are the CPU's own, measured here so that a
    # change on either side shows: linalg.pinv under autocast (the real call gives bfloat16, the
    # fake one float32) and item() of a 0-dim fake tensor (data-dependent).
    from torch._subclasses.fake_tensor import DataDependentOutputException
    a = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))
    for device in ("cpu", "tpu"):
        t = a.to(device)
        with torch.autocast(device, dtype=torch.bfloat16):
            real, fake = _real_and_fake(lambda x: [torch.linalg.pinv(x)], [t])
        assert (real[0].dtype, fake[0].dtype) == (torch.bfloat16, torch.float32), device
        with FakeTensorMode() as mode:
            with pytest.raises(DataDependentOutputException):
                mode.from_tensor(torch.tensor(3.0, device=device)).item()
