#pragma once
// Device memory is host memory in the simulator. A "host alias" is a CPU tensor over the same
// bytes (same sizes, strides and offset), through which a kernel can run a host implementation
// in place, without copying. Also here: the helpers every kernel that works this way needs.
#include <ATen/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>

#include <initializer_list>

namespace torchtpu::aten {

// The conjugate and negative view bits are kept: PyTorch resolves them before most kernels, but
// _copy_from and the ops that understand them (linalg solvers, matmuls) see them.
inline at::Tensor host_alias(const at::Tensor& t) {
  at::Tensor alias =
      at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  if (t.is_conj()) alias = alias.conj();
  if (t.is_neg()) alias = alias._neg_view();
  return alias;
}

// A device tensor holding a copy of a host result (undefined stays undefined).
inline at::Tensor on_device(const at::Tensor& host, c10::Device device) {
  if (!host.defined()) return host;
  const c10::DeviceGuard guard(device);
  auto out = at::empty_strided(host.sizes(), host.strides(), host.options().device(device));
  host_alias(out).copy_(host);
  return out;
}

// CUDA's rule and message: all (defined) tensors of an op on one device.
inline void check_same_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  const at::Tensor* first = nullptr;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
      continue;
    }
    TORCH_CHECK(t->device() == first->device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                first->device(), " and ", t->device(), "! (in ", op, ")");
  }
}

}  // namespace torchtpu::aten
