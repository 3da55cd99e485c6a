"""PyTorch's foreach OpInfo databases on "tpu", compared with the CPU (differential testing).

Every ForeachFuncInfo of foreach_unary_op_db, foreach_binary_op_db, foreach_pointwise_op_db,
foreach_reduce_op_db and foreach_other_op_db, in every dtype among float32, bfloat16, int64
and bool it supports, with its sample inputs of 1 and 4 tensors per list: the functional
variant and the in-place one run on "tpu" and on the CPU; results, and the lists an in-place
variant writes, are compared at PyTorch's default tolerances for the dtype. A sample the CPU
refuses must be refused on "tpu" with the same kind of error.

How the op ran is checked too (docs/runtime.md, "Foreach ops"): where ops run at once (strict
and debug eager) a foreach op that torchtpu registers runs as one launch, counted once as a
native op, with none of its per-tensor ops counted. In fused eager, an in-place op whose
tensors are all in lists, on the device and no larger than a fused region's block (32768
elements), writing two tensors or more, is recorded as one node and runs so at the flush (counted once); any other is
recorded as its per-tensor ops, and the foreach op itself is not counted.
"""
import torch
import torchtpu
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import (
    foreach_binary_op_db, foreach_other_op_db, foreach_pointwise_op_db, foreach_reduce_op_db,
    foreach_unary_op_db)
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.utils._pytree import tree_map

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)
FOREACH_DB = (foreach_unary_op_db + foreach_binary_op_db + foreach_pointwise_op_db
              + foreach_reduce_op_db + foreach_other_op_db)


# The foreach ops with a torchtpu kernel (the others run as PyTorch's per-tensor decomposition).
REGISTERED = {n.split(".")[0] for n in torch._C._dispatch_get_all_op_names()
              if n.startswith("aten::_foreach_")
              and torch._C._dispatch_has_kernel_for_dispatch_key(n, "PrivateUse1")}


def _move(x, device):
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, x)


def _clone(x):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def _native_counts():
    return {k: v for k, v in torchtpu.metrics.native_ops().items() if v}


class TestTpuForeach(TestCase):
    def _compare(self, fn, sample, device, what):
        """fn on the CPU and on "tpu"; returns the tpu's native-op counts of the call."""
        cpu_args = (_clone(sample.input), *_clone(sample.args))
        tpu_args = (_move(sample.input, device), *_move(sample.args, device))
        kwargs = sample.kwargs
        try:
            expected = fn(*cpu_args, **kwargs)
        except Exception as cpu_error:  # noqa: BLE001
            with self.assertRaises(type(cpu_error), msg=what):
                # (Kept alive: fused eager drops recorded work whose results are dead, and its
                # errors with it.)
                kept = fn(*tpu_args, **kwargs)  # noqa: F841
                torchtpu.sync()
            return None
        torchtpu.metrics.reset()
        actual = fn(*tpu_args, **kwargs)
        torchtpu.sync()
        counts = _native_counts()
        self.assertEqual(_move(actual, "cpu"), expected, exact_device=False, msg=what)
        # (An in-place variant writes its first list; the functional variants write nothing.)
        self.assertEqual(_move(tpu_args[0], "cpu"), cpu_args[0], exact_device=False, msg=what)
        return counts

    def _check_how_it_ran(self, counts, name, args, what):
        if counts is None:
            return
        ran = {k for k in counts if k.split(".")[0] == f"aten::{name}"}
        per_tensor = f"aten::{name}" not in REGISTERED
        if torchtpu.get_eager_mode() == "fused":
            lists = [a for a in args if isinstance(a, (list, tuple)) and a
                     and all(isinstance(t, torch.Tensor) for t in a)]  # (not Scalar[])
            # (A scalar given as a tensor keeps the op per tensor, unless PyTorch's kernel of the
            # overload reads it first, .item(), and calls the Scalar overload: as in strict.)
            scalar_read = "aten::_local_scalar_dense" in counts
            one_node = (name.endswith("_") and bool(lists) and len(lists[0]) >= 2
                        and (scalar_read or not any(isinstance(a, torch.Tensor) for a in args))
                        and all(t.device.type == "tpu" and t.layout == torch.strided
                                and t.numel() <= 32768 for a in lists for t in a))
            per_tensor = per_tensor or not one_node
        if per_tensor:
            self.assertFalse(ran, f"{what}: expected its per-tensor ops, ran {counts}")
        else:
            self.assertEqual(sum(counts[k] for k in ran), 1, msg=f"{what}: {counts}")
            # (_foreach_add.Tensor reads its scalar tensor's value first: PyTorch's kernel of
            # that overload calls .item() and then _foreach_add.Scalar.)
            self.assertEqual(set(counts) - {"aten::_local_scalar_dense"}, ran,
                             f"{what}: per-tensor ops ran too: {counts}")

    @ops(FOREACH_DB, allowed_dtypes=DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        torchtpu.set_fallback_mode("silent")
        compared = 0
        for n in (1, 4):
            for sample in op.sample_inputs("cpu", dtype, num_input_tensors=[n]):
                for kind, fn in (("functional", op.method_variant), ("in-place", op.inplace_variant)):
                    if fn is None:
                        continue
                    name = fn.__name__  # (_foreach_zero has its in-place variant only)
                    what = f"{op.name} {kind}, {n} tensors, kwargs {sample.kwargs}"
                    counts = self._compare(fn, sample, device, what)
                    self._check_how_it_ran(
                        counts, name, (_move(sample.input, device), *_move(sample.args, device)),
                        what)
                    compared += 1
        self.assertGreater(compared, 0)


instantiate_device_type_tests(TestTpuForeach, globals(), only_for=("tpu",))

if __name__ == "__main__":
    run_tests()
