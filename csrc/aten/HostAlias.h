#pragma once
// Device memory is host memory in the simulator. A "host alias" is a CPU tensor over the same
// bytes (same sizes, strides and offset), through which a kernel can run a host implementation
// in place, without copying. Also here: the helpers every kernel that works this way needs.
#include <ATen/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <initializer_list>

namespace torchtpu::aten {

// A CPU tensor over the bytes of `storage` (a TPU tensor's) with this geometry. `resizable`: its
// storage may be resized (to fresh host memory, leaving the device memory alone), as a CPU
// kernel resizes an out= argument; otherwise resizing it is an error. (Built directly: a storage
// over the same bytes and a tensor on it, none of at::from_blob's size computations.)
inline at::Tensor host_alias_over(const c10::Storage& storage, c10::IntArrayRef sizes,
                                  c10::IntArrayRef strides, int64_t offset,
                                  caffe2::TypeMeta dtype, bool resizable) {
  auto impl = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.sym_nbytes(),
      c10::DataPtr(storage.mutable_data(), c10::Device(c10::kCPU)),
      resizable ? c10::GetCPUAllocator() : nullptr, resizable);
  auto alias = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(std::move(impl)), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return alias;
}

// Conjugate and negative views keep their bits: PyTorch resolves them before most kernels, but
// _copy_from and the ops that understand them (linalg solvers, matmuls) see them.
inline at::Tensor with_view_bits(at::Tensor alias, bool conj, bool neg) {
  if (conj) alias = alias.conj();
  if (neg) alias = alias._neg_view();
  return alias;
}

inline at::Tensor host_alias(const at::Tensor& t) {
  return with_view_bits(host_alias_over(t.storage(), t.sizes(), t.strides(), t.storage_offset(),
                                        t.dtype(), /*resizable=*/false),
                        t.is_conj(), t.is_neg());
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
