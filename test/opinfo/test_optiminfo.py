"""PyTorch's OptimizerInfo database on "tpu": every optim_db optimizer, with each of its input
configurations, takes the same steps on "tpu" as on the CPU.

For each configuration: the same small model (weight and bias) on both devices, five steps with
a closure computing a fixed loss (so LBFGS, which needs one, runs too), and the parameters
compared after every step at PyTorch's default float32 tolerance. SparseAdam, which takes sparse
gradients only, steps an embedding with sparse gradients (`nn.Embedding(sparse=True)`).

The configurations are those optim_db gives the CPU, and the capturable ones it gives CUDA only
(`capturable=True`: the step's count and bias corrections kept on the device, so that the step
can be captured; compiled mode's optimizer steps are capturable ones): on "tpu" as given, on the
CPU without capturable (which the CPU refuses; the arithmetic is the same). optim_db gives no
configuration with `differentiable=True` (a step differentiated itself, over parameters that are
not leaves: PyTorch's own test drives it through gradcheck; the CPU refuses this harness's leaf
parameters the same way).
"""
import copy

import torch
import torchtpu
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_optimizers import optim_db, optims
from torch.testing._internal.common_utils import TestCase, run_tests


def _steps(optim_cls, kwargs, device, model, data):
    model = copy.deepcopy(model).to(device)
    params = list(model.parameters())
    opt = optim_cls(params, **kwargs)
    x, y = (t.to(device) for t in data)
    history = []
    for _ in range(5):
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        opt.step(closure)
        history.append([p.detach().cpu().clone() for p in params])
    return history


def _inputs(optim_info, dtype):
    """optim_db's configurations for the CPU, then the capturable ones it gives CUDA only."""
    cpu = optim_info.optim_inputs_func(device="cpu", dtype=dtype)
    descs = {i.desc for i in cpu}
    cuda_only = [i for i in optim_info.optim_inputs_func(device="cuda", dtype=dtype)
                 if i.desc not in descs and i.kwargs.get("capturable")]
    return cpu + cuda_only


class TestTpuOptimInfo(TestCase):
    @optims(optim_db, dtypes=[torch.float32])
    def test_steps_match_cpu(self, device, dtype, optim_info):
        torchtpu.set_fallback_mode("silent")
        torch.manual_seed(0)
        if optim_info.only_supports_sparse_grads:
            model = torch.nn.Embedding(10, 3, sparse=True)
            data = (torch.randint(0, 10, (12,)), torch.randn(12, 3))
        else:
            # Muon takes 2-D parameters only.
            model = torch.nn.Linear(6, 3, bias=optim_info.optim_cls.__name__ != "Muon")
            data = (torch.randn(10, 6), torch.randn(10, 3))
        capturable = 0
        for optim_input in _inputs(optim_info, dtype):
            kwargs = dict(optim_input.kwargs)
            capturable += bool(kwargs.get("capturable"))
            cpu_kwargs = {k: v for k, v in kwargs.items() if k != "capturable"}
            cpu = _steps(optim_info.optim_cls, cpu_kwargs, "cpu", model, data)
            tpu = _steps(optim_info.optim_cls, kwargs, device, model, data)
            for step, (a, b) in enumerate(zip(tpu, cpu)):
                self.assertEqual(a, b, msg=f"{optim_input.desc}, step {step + 1}")
        if optim_info.has_capturable_arg:
            self.assertGreater(capturable, 0, "no capturable configuration was compared")


instantiate_device_type_tests(TestTpuOptimInfo, globals(), only_for=("tpu",))

if __name__ == "__main__":
    run_tests()
