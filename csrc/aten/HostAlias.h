#pragma once
// Device memory is host memory in the simulator. A "host alias" is a CPU tensor over the same
// bytes (same sizes, strides and offset), through which a kernel can run a host implementation
// in place, without copying.
#include <ATen/Tensor.h>
#include <ATen/ops/from_blob.h>

namespace torchtpu::aten {

inline at::Tensor host_alias(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

}  // namespace torchtpu::aten
