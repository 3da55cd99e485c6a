// Backend tensor metadata (docs/runtime.md, "Tensor metadata").
//
// PyTorch lets a PrivateUse1 backend keep metadata of its own on a tensor (c10::BackendMeta on the
// TensorImpl: shared by detach(), .data and shallow copies, not by views or new results) and
// register how it is read and written as the {str: bool} map of torch._utils.get_tensor_metadata
// and set_tensor_metadata, which torch.save writes with the tensor and torch.load gives back
// (torch::jit::TensorBackendMetaRegistry). A tpu tensor has no device state of its own to keep
// there (the simulated chip's tiled HBM layout follows from shape and dtype), so what it carries
// is what a user sets: the keys and values of the last set_tensor_metadata (without PyTorch's own
// "conj" and "neg", which the tensor's bits keep), kept as they were given.
#include "api/Control.h"

#include <c10/core/TensorImpl.h>
#include "pytorch/Internals.h"

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace torchtpu::api {
namespace {

// Never changed once made (a set makes a new one), so the tensors that share it may.
struct TpuBackendMeta final : c10::BackendMeta {
  explicit TpuBackendMeta(std::map<std::string, bool> entries) : entries(std::move(entries)) {}
  const std::map<std::string, bool> entries;
};

// torch._utils.get_tensor_metadata and torch.save of a tpu tensor.
void write_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  const auto* meta = dynamic_cast<const TpuBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) return;
  for (const auto& [key, value] : meta->entries) metadata.emplace(key, value);
}

// torch._utils.set_tensor_metadata and torch.load of a tpu tensor: the tensor's metadata becomes
// `metadata` (an empty map clears it).
void read_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (metadata.empty()) {
    if (impl->get_backend_meta() != nullptr) impl->set_backend_meta(nullptr);
    return;
  }
  impl->set_backend_meta(c10::make_intrusive<TpuBackendMeta>(
      std::map<std::string, bool>(metadata.begin(), metadata.end())));
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &write_metadata,
                                        &read_metadata);
  return true;
}();

}  // namespace

void copy_backend_meta(const at::Tensor& src, const at::Tensor& dst) {
  const c10::intrusive_ptr<c10::BackendMeta> meta =
      src.unsafeGetTensorImpl()->get_backend_meta_intrusive_ptr();
  if (meta) dst.unsafeGetTensorImpl()->set_backend_meta(meta->clone(meta));
}

}  // namespace torchtpu::api
