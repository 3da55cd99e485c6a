"""PyTorch's ModuleInfo database on "tpu": every module_db entry's forward and backward against
the CPU (eval mode, so that training-only randomness and running statistics do not differ).
With TORCHTPU_COMPILED=1 the tpu module runs compiled, torch.compile(module, backend="tpu")
(its forward and AOTAutograd's backward graphs as programs).

For each entry and each of its module inputs: build the module on the CPU with a fixed seed,
deep-copy it to "tpu", run forward on both, compare, then backpropagate the sum of the outputs
and compare the input and parameter gradients. float32, PyTorch's default tolerance.
"""
import copy
import os

import torch
import torchtpu
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests


COMPILED = os.environ.get("TORCHTPU_COMPILED") == "1"


def _differs_under_compile_in_pytorch(module_info, module_input):
    """Cases where PyTorch's own compiled result differs from its eager one, so that compiled
    "tpu" cannot match the CPU's eager result: why, or None. (Each was checked with
    torch.compile(backend="aot_eager") on the CPU, which gives what compiled "tpu" gives.)"""
    kwargs = module_input.constructor_input.kwargs
    args = module_input.forward_input.args
    if (module_info.module_cls is torch.nn.MultiLabelMarginLoss and
            kwargs.get("reduction") == "none" and args and args[0].dim() == 1):
        return "multilabel_margin_loss's meta kernel makes reduction='none' of a 1-D input [1]; eager makes []"
    return None


def _selected():
    shard = os.environ.get("TORCHTPU_OPINFO_SHARD", "0/1")
    index, count = (int(x) for x in shard.split("/"))
    return [m for i, m in enumerate(module_db) if i % count == index]


def _leaves(obj):
    return [x for x in torch.utils._pytree.tree_leaves(obj) if isinstance(x, torch.Tensor)]


def _to(obj, device):
    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad) if y.is_floating_point() or y.is_complex() else y
    return torch.utils._pytree.tree_map(move, obj)


class TestTpuModuleInfo(TestCase):
    @modules(_selected(), allowed_dtypes=(torch.float32,))
    def test_forward_backward_match_cpu(self, device, dtype, module_info, training):
        if training and module_info.train_and_eval_differ:
            self.skipTest("compared in eval mode (training-mode randomness and statistics differ)")
        torchtpu.set_fallback_mode("silent")
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype,
                                                requires_grad=True, training=False)
        for module_input in inputs[:8]:
            if module_input.forward_input is None:
                continue
            if COMPILED and _differs_under_compile_in_pytorch(module_info, module_input):
                continue
            c_args, c_kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
            torch.manual_seed(0)
            cpu_module = module_info.module_cls(*c_args, **c_kwargs).to(dtype).train(training)
            tpu_module = copy.deepcopy(cpu_module).to(device)
            f_args, f_kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
            cpu_in = _to((f_args, f_kwargs), "cpu")
            tpu_in = _to((f_args, f_kwargs), device)
            torch.manual_seed(1)
            expected = cpu_module(*cpu_in[0], **cpu_in[1])
            run = tpu_module
            if COMPILED:
                torch._dynamo.reset()  # (a fresh cache per module: no recompile limit)
                run = torch.compile(tpu_module, backend="tpu")
            torch.manual_seed(1)
            actual = run(*tpu_in[0], **tpu_in[1])
            self.assertEqual(_to(actual, "cpu"), expected, exact_device=False)
            outs_cpu = [o for o in _leaves(expected) if o.requires_grad]
            outs_tpu = [o for o in _leaves(actual) if o.requires_grad]
            if not outs_cpu:
                continue
            sum(o.sum() for o in outs_cpu).backward()
            sum(o.sum() for o in outs_tpu).backward()
            for a, b in zip(_leaves(tpu_in) + list(tpu_module.parameters()),
                            _leaves(cpu_in) + list(cpu_module.parameters())):
                if b.grad is not None:
                    self.assertEqual(a.grad.cpu(), b.grad, exact_device=False)


instantiate_device_type_tests(TestTpuModuleInfo, globals(), only_for=("tpu",))

if __name__ == "__main__":
    run_tests()
