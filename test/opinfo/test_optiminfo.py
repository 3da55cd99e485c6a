"""PyTorch's OptimizerInfo database on "tpu": every optim_db optimizer, with each of its input
configurations, takes the same steps on "tpu" as on the CPU.

For each configuration: the same small model (weight and bias) on both devices, five steps with
a closure computing a fixed loss (so LBFGS, which needs one, runs too), and the parameters
compared after every step at PyTorch's default float32 tolerance. Optimizers that take sparse
gradients only (SparseAdam) are skipped: sparse tensors are not supported on tpu.
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


class TestTpuOptimInfo(TestCase):
    @optims(optim_db, dtypes=[torch.float32])
    def test_steps_match_cpu(self, device, dtype, optim_info):
        if optim_info.only_supports_sparse_grads:
            self.skipTest("sparse gradients: sparse tensors are not supported on tpu")
        torchtpu.set_fallback_mode("silent")
        torch.manual_seed(0)
        # Muon takes 2-D parameters only.
        model = torch.nn.Linear(6, 3, bias=optim_info.optim_cls.__name__ != "Muon")
        data = (torch.randn(10, 6), torch.randn(10, 3))
        for optim_input in optim_info.optim_inputs_func(device="cpu", dtype=dtype):
            kwargs = dict(optim_input.kwargs)
            if kwargs.get("capturable") or kwargs.get("differentiable"):
                continue  # CUDA-graph capture and differentiable steps: not tpu features
            cpu = _steps(optim_info.optim_cls, kwargs, "cpu", model, data)
            tpu = _steps(optim_info.optim_cls, kwargs, device, model, data)
            for step, (a, b) in enumerate(zip(tpu, cpu)):
                self.assertEqual(a, b, msg=f"{optim_input.desc}, step {step + 1}")


instantiate_device_type_tests(TestTpuOptimInfo, globals(), only_for=("tpu",))

if __name__ == "__main__":
    run_tests()
