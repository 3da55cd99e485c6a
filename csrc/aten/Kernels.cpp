// The runtime-level native kernels: factories (empty, empty_strided, arange), copies and
// transfers (_copy_from, _copy_from_and_resize, _local_scalar_dense), views and storage
// (as_strided, view, ..., resize_, set_), fills (fill_, zero_), the shallow-copy rule between
// CPU and TPU tensors, and a few ops whose PyTorch path does not serve a new backend
// (record_stream, one_hot, histc, mode.values, mse_loss). Kept together as the kernels every
// tensor needs, whatever it computes. Elsewhere: the launch machinery all kernels run through
// (Launch.cpp), the random ops (Random.cpp), batch norm (BatchNorm.cpp), the element-wise fast
// path (Elementwise.cpp), the matmul family and convolutions (Matmul.cpp, Convolution.cpp), the
// VPU ops (HostExecution.cpp); every other aten op reaches the CPU fallback (Fallback.cpp) until
// it has a kernel of its own.
#include "aten/Charge.h"
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "aten/Unsigned.h"
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include "pytorch/Internals.h"
#include <ATen/ops/_has_compatible_shallow_copy_type_native.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mode.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace torchtpu::aten {

namespace {

using runtime::metrics::count;

// The names the own kernels charge their launches under (charge_vector, Charge.h).
constexpr char kCopyFrom[] = "aten::_copy_from";
constexpr char kArange[] = "aten::arange";
constexpr char kFill[] = "aten::fill_";
constexpr char kHistc[] = "aten::histc";
constexpr char kZero[] = "aten::zero_";

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "The TPU device supports only strided tensors, not ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "Only CPU tensors can be pinned; pin_memory=True is not valid with device 'tpu'");
}

// ---------------------------------------------------------------------------------------------
// Factories

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_generic(size, &runtime::allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_strided_generic(size, stride, &runtime::allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  // Computed on the host, where the length and rounding rules live, then written in place.
  // (uint16/32/64, which PyTorch's CPU arange lacks, in int64: aten/Unsigned.h.)
  auto host = at::empty({0}, out.options().device(at::kCPU).dtype(
                                 host_factory_type(out.scalar_type(), "arange")));
  at::arange_out(host, start, end, step);
  {
    const c10::DeviceGuard guard(out.device());
    at::native::resize_(out, host.sizes(), std::nullopt);
  }
  charge_vector<kArange>(out);  // one VPU pass writing the sequence
  launch(out.device(), "aten::arange",
         [out, dst = host_alias(out), host]() mutable { dst.copy_(host); }, {out});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Copies: every direction, dtype and layout. The host kernel does the conversion; bytes moved
// are counted per direction.

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined(), "Source tensor (self) is not defined.");
  TORCH_CHECK(dst.defined(), "Destination tensor (dst) is not defined.");
  const bool src_tpu = self.device().is_privateuseone();
  const bool dst_tpu = dst.device().is_privateuseone();
  TORCH_CHECK(src_tpu || self.device().is_cpu(), "Copies to a TPU tensor from device ",
              self.device(), " are not supported; move the tensor to the CPU first.");
  TORCH_CHECK(dst_tpu || dst.device().is_cpu(), "Copies from a TPU tensor to device ",
              dst.device(), " are not supported; copy to the CPU first.");
  const int64_t bytes = dst.numel() * dst.element_size();
  if (src_tpu && dst_tpu) {
    count("transfer.device_to_device_bytes", bytes);
  } else if (dst_tpu) {
    count("transfer.host_to_device_bytes", bytes);
  } else {
    count("transfer.device_to_host_bytes", bytes);
  }
  if (dst.numel() == 0) return dst;
  if (src_tpu && dst_tpu && self.device() == dst.device()) {
    // A copy or cast on the device: one VPU pass, in stream order.
    charge_device_copy(dst, self);
    // Host aliases are made now: the work must see the shapes of issue time, as a kernel
    // launch captures its arguments (the tensors themselves keep the memory alive).
    launch(dst.device(), "aten::_copy_from",
           [self, dst, d = host_alias(dst), src = host_alias(self)]() mutable {
             at::native::copy_(d, src, false);
           },
           {dst}, dst.numel() >= kParallelElements);
    return dst;
  }
  if (src_tpu && !dst_tpu) check_has_values(self, "Copying to the host");
  // Transfers (and copies between two devices) see device memory as of now: the host waits
  // for the queued work of the devices involved, as a pageable CUDA copy does.
  if (src_tpu) wait_for_device(self.device());
  if (dst_tpu) wait_for_device(dst.device());
  at::Tensor dst_host = dst_tpu ? host_alias(dst) : dst;
  at::Tensor src_host = src_tpu ? host_alias(self) : self;
  at::native::copy_(dst_host, src_host, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  {
    const c10::DeviceGuard guard(dst.device());
    at::native::resize_(dst, self.sizes(), std::nullopt);
  }
  return copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const at::Tensor& self) {
  check_has_values(self, "Reading a value (.item(), if tensor:, printing)");
  count("transfer.device_to_host_bytes", self.element_size());
  wait_for_device(self.device());
  return at::native::_local_scalar_dense_cpu(host_alias(self));
}

// ---------------------------------------------------------------------------------------------
// Views and storage

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor _reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                          c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(self.device());  // new storage goes to self's device
  // Growing a storage copies its bytes on the host: let queued writers finish first.
  if (self.storage().nbytes() > 0) wait_for_device(self.device());
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

// View ops whose CPU kernel is the generic as_strided-based one (the fallback cannot serve
// views: a copy would break aliasing).
at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

at::Tensor& set_source_Tensor_(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_Storage_(at::Tensor& self, at::Storage source) {
  return at::native::set_(self, source);
}

at::Tensor& set_source_Storage_storage_offset_(at::Tensor& self, at::Storage storage,
                                               c10::SymInt storage_offset,
                                               c10::SymIntArrayRef size,
                                               c10::SymIntArrayRef stride) {
  return at::cpu::set__symint(self, storage, storage_offset, size, stride);
}

at::Tensor& set_(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &runtime::allocator(), true);
  return at::native::set_(self, storage);
}

// ---------------------------------------------------------------------------------------------
// Fills

void check_scalar_operand(const at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  TORCH_CHECK(value.device() == self.device() || value.device().is_cpu(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", value.device(), "!");
}

at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value) {
  charge_vector<kFill>(self);
  launch(self.device(), "aten::fill_",
         [self, alias = host_alias(self), value]() mutable { alias.fill_(value); }, {self});
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  check_scalar_operand(self, value);
  charge_vector<kFill>(self);
  const at::Tensor v = value.is_cpu() ? value.clone() : value;  // a CPU scalar by value
  launch(self.device(), "aten::fill_",
         [self, alias = host_alias(self), v, v_alias = v.is_cpu() ? v : host_alias(v)]() mutable {
           alias.fill_(v_alias.item());
         },
         {self});
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  charge_vector<kZero>(self);
  launch(self.device(), "aten::zero_",
         [self, alias = host_alias(self)]() mutable { alias.zero_(); }, {self});
  return self;
}

// ---------------------------------------------------------------------------------------------
// record_stream and one_hot

// CUDA's meaning: the memory is not reused until the work `stream` has queued so far is done
// with it. Here queued work holds its tensors, so a block returns to the allocator's cache only
// after every stream using it is done (runtime/Allocator.cpp, recordStream); the call checks
// its arguments and has nothing to add.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a TPU stream for a TPU tensor, got a stream of ",
              stream.device());
  TORCH_CHECK(stream.device_index() == self.device().index(), "record_stream: the stream is on ",
              stream.device(), " but the tensor on ", self.device());
  runtime::allocator().recordStream(self.storage().data_ptr(), stream);
}

// one_hot: PyTorch's composite checks the class values only on the CPU and CUDA; elsewhere a bad
// value surfaces as scatter's index error. Here it is checked as on those devices (a host read,
// as CUDA's check is), with their messages.
at::Tensor one_hot(const at::Tensor& self, int64_t num_classes) {
  TORCH_CHECK(self.scalar_type() == at::kLong,
              "one_hot is only applicable to index tensor of type LongTensor.");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) {
    TORCH_CHECK(num_classes != -1, "Can not infer total number of classes from empty tensor.");
    shape.push_back(num_classes);
    return at::empty(shape, self.options());
  }
  TORCH_CHECK(num_classes >= -1, "num_classes should be positive");
  TORCH_CHECK(self.min().item<int64_t>() >= 0, "Class values must be non-negative.");
  const int64_t largest = self.max().item<int64_t>();
  if (num_classes == -1) {
    num_classes = largest + 1;
  } else {
    TORCH_CHECK(largest < num_classes, "Class values must be smaller than num_classes.");
  }
  shape.push_back(num_classes);
  at::Tensor result = at::zeros(shape, self.options());
  result.scatter_(-1, self.unsqueeze(-1), 1);
  return result;
}

// ---------------------------------------------------------------------------------------------
// histc. PyTorch's CPU kernel takes floating types only, but CUDA's takes integers too, and
// code written for accelerators relies on it (transformers' MoE routing counts expert indices
// with histc when the device is not the CPU). Integers are counted through float32, exact for
// |x| < 2^24. bool, which neither takes, reaches the CPU kernel and its error.

at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min,
                 const c10::Scalar& max) {
  wait_for_device(self.device());
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  const at::Tensor h = host_alias(self);
  at::Tensor result = at::histc(integral ? h.to(at::kFloat) : h, bins, min, max);
  if (integral) result = result.to(self.scalar_type());
  charge_vector<kHistc>(self);
  return on_device(result, self.device());
}

// torch.mode(..., out=): PyTorch's out= variant is a composite that accepts only CPU, CUDA and
// XPU tensors. Here: the same argument checks, the op itself (the host executor's), and the
// results written to the out= tensors, resized as PyTorch resizes them (with its warning when
// a non-empty tensor has another shape).
std::tuple<at::Tensor&, at::Tensor&> mode_values(const at::Tensor& self, int64_t dim,
                                                 bool keepdim, at::Tensor& values,
                                                 at::Tensor& indices) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, "mode only supports strided layout, got: ",
              self.layout());
  for (const auto& [out, what] : {std::pair<const at::Tensor&, const char*>{values, "values"},
                                  {indices, "indices"}}) {
    TORCH_CHECK(out.device() == self.device(), "expected device '", self.device(), "' but got '",
                out.device(), "' for ", what, " output");
  }
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "expected scalar type '",
              self.scalar_type(), "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type '", at::kLong,
              "' but got '", indices.scalar_type(), "' for indices output");
  const c10::DeviceGuard guard(self.device());
  auto [v, i] = at::mode(self, dim, keepdim);
  at::native::resize_output(values, v.sizes());
  at::native::resize_output(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

// ---------------------------------------------------------------------------------------------
// mse_loss

// mse_loss with a reduction. PyTorch's generic kernel for the functional form calls mse_loss.out
// with a 0-dim result, and the CPU out kernel first writes the element-wise loss into that
// tensor (resizing it, with a deprecation warning on every call). The CPU's own functional
// kernel computes the element-wise loss, then reduces it; this one does the same on the device.
at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  const c10::ScalarType dtype = at::result_type(self, target);
  // The CPU kernel's dtypes (its error, raised here at the op rather than at the next sync).
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dtype), "mse_loss is not implemented for '",
                              c10::toString(dtype), "' (nor on the CPU): use a floating-point type");
  at::Tensor loss =
      at::empty(at::infer_size(self.sizes(), target.sizes()), self.options().dtype(dtype));
  at::mse_loss_out(loss, self, target, at::Reduction::None);
  if (reduction == at::Reduction::Mean) return loss.mean();
  if (reduction == at::Reduction::Sum) return loss.sum();
  return loss;
}

// ---------------------------------------------------------------------------------------------
// Shallow copies between CPU and TPU tensors. Tensor::set_data (used by C++
// torch::nn::Module::to and clone(device)) requires _has_compatible_shallow_copy_type, whose
// built-in rule pairs CPU with CUDA and a few others but not with PrivateUse1. Dense CPU and TPU
// tensors are made compatible here, as CPU and CUDA are.

bool dense_cpu_or_tpu(c10::DispatchKeySet keys) {
  constexpr auto backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
  return keys.has(c10::DispatchKey::Dense) && keys.has_any(backends);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return at::native::_has_compatible_shallow_copy_type(self, from) ||
         (dense_cpu_or_tpu(self.key_set()) && dense_cpu_or_tpu(from.key_set()));
}

}  // namespace

// _copy_from handles conjugate and negative views itself (through host aliases that keep the
// bits). Without these fallthroughs PyTorch's Conjugate/Negative fallbacks would materialize
// the view with clone -> copy_ -> _copy_from, which comes back to them: endless recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

// A call with one CPU and one TPU tensor dispatches to AutogradPrivateUse1 first.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

void charge_device_copy(const at::Tensor& dst, const at::Tensor& src) {
  charge_vector<kCopyFrom>(
      dst, sim::CostModel::padded_bytes(src.sizes(), static_cast<int>(src.element_size())));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         entry(TORCH_FN(has_compatible_shallow_copy_type), Capture::view));
  m.impl("empty.memory_format", entry(TORCH_FN(empty_memory_format), Capture::factory));
  m.impl("empty_strided", entry(TORCH_FN(empty_strided), Capture::factory));
  m.impl("arange.start_out", entry(TORCH_FN(arange_out), Capture::none));
  m.impl("_copy_from", entry(TORCH_FN(copy_from), Capture::copy));
  m.impl("_copy_from_and_resize", entry(TORCH_FN(copy_from_and_resize), Capture::none));
  m.impl("_local_scalar_dense", entry(TORCH_FN(_local_scalar_dense), Capture::host_read));
  m.impl("as_strided", view_entry(&as_strided, "aten::as_strided"));
  m.impl("view", view_entry(&view, "aten::view"));
  m.impl("_reshape_alias", view_entry(&_reshape_alias, "aten::_reshape_alias"));
  m.impl("unfold", view_entry(&unfold, "aten::unfold"));
  m.impl("view_as_real", view_entry(&view_as_real, "aten::view_as_real"));
  m.impl("view_as_complex", view_entry(&view_as_complex, "aten::view_as_complex"));
  m.impl("resize_", entry(TORCH_FN(resize_), Capture::none));
  m.impl("set_.source_Tensor", entry(TORCH_FN(set_source_Tensor_), Capture::view));
  m.impl("set_.source_Storage", entry(TORCH_FN(set_source_Storage_), Capture::view));
  m.impl("set_.source_Storage_storage_offset",
         entry(TORCH_FN(set_source_Storage_storage_offset_), Capture::view));
  m.impl("set_", entry(TORCH_FN(set_), Capture::view));
  m.impl("fill_.Scalar", entry(TORCH_FN(fill_scalar_), Capture::results_are_arguments));
  m.impl("fill_.Tensor", entry(TORCH_FN(fill_tensor_), Capture::results_are_arguments));
  m.impl("zero_", entry(TORCH_FN(zero_), Capture::results_are_arguments));
  m.impl("one_hot", entry(TORCH_FN(one_hot), Capture::none));
  m.impl("record_stream", entry(TORCH_FN(record_stream), Capture::view));
  m.impl("histc", entry(TORCH_FN(histc), Capture::none));
  m.impl("mode.values", entry(TORCH_FN(mode_values), Capture::none));
  m.impl("mse_loss", entry(TORCH_FN(mse_loss), Capture::new_results));
}

}  // namespace torchtpu::aten
