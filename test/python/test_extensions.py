"""C++ extensions on "tpu" tensors: an op built with torch.utils.cpp_extension that reads a
tensor's memory through data_ptr() sees its values in every eager mode, from any thread, also
when fused eager has not computed the tensor yet (its storage is pending: docs/eager-modes.md)."""
import os
import threading

import pytest
import torch
import torchtpu

_SOURCE = r"""
#include <torch/extension.h>

// Sums a float32 tensor's elements by reading its memory, as extension kernels do.
double sum_memory(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous(), "contiguous float32 only");
  const float* p = t.data_ptr<float>();
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += p[i];
  return s;
}

// Writes 2 * t into a tensor it allocates on t's device, by memory.
at::Tensor twice_by_memory(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous(), "contiguous float32 only");
  at::Tensor out = at::empty_like(t);
  const float* p = t.data_ptr<float>();
  float* q = out.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) q[i] = 2 * p[i];
  return out;
}

TORCH_LIBRARY(torchtpu_test_ext, m) {
  m.def("sum_memory(Tensor t) -> float", &sum_memory);  // composite ops: no tpu kernel
  m.def("twice_by_memory(Tensor t) -> Tensor", &twice_by_memory);
}
"""


@pytest.fixture(scope="module")
def ext():
    from torch.utils.cpp_extension import load_inline
    build = os.path.join(os.path.dirname(__file__), "..", "..", "build", "ext", "sum_memory")
    os.makedirs(build, exist_ok=True)
    load_inline("torchtpu_test_ext", cpp_sources=_SOURCE, functions=None, is_python_module=False,
                build_directory=build, verbose=False)
    return torch.ops.torchtpu_test_ext


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("thread", ["main", "other"])
def test_an_extension_op_reading_memory_sees_the_values_of_work_not_yet_run(ext, mode, thread):
    torchtpu.set_eager_mode(mode)
    a = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    expected = float((a * 2 + 1).exp().sum())
    results = []

    def call():
        x = a.to("tpu")
        y = (x * 2 + 1).exp()  # pending in fused eager: no memory until something needs it
        results.append(ext.sum_memory(y))  # torch.ops releases the GIL around the kernel

    if thread == "main":
        call()
    else:
        t = threading.Thread(target=call)
        t.start()
        t.join()
    assert results == [pytest.approx(expected, rel=1e-6)]


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("overload", [False, True])
def test_an_extension_op_writing_a_tensor_it_allocates_feeds_later_ops(ext, mode, overload):
    torchtpu.set_eager_mode(mode)
    torchtpu.metrics.reset()
    a = torch.randn(4, 16)
    op = ext.twice_by_memory.default if overload else ext.twice_by_memory
    x = a.to("tpu")
    y = op(torch.relu(x) + 1)  # its argument pending in fused eager, queued in strict
    z = (y * 3).sum(1)
    torch.testing.assert_close(z.cpu(), ((torch.relu(a) + 1) * 2 * 3).sum(1))
    if mode == "fused":
        assert "custom op without a tpu kernel" in torchtpu.metrics.materializations()
