// Native PrivateUse1 kernels of the runtime layer: factories, copies, views, scalar reads, fills
// and the random fills that use the device generator. Every other aten op reaches the CPU
// fallback (Fallback.cpp) until it has a kernel of its own; the matmul family and convolutions
// are in Matmul.cpp, the VPU ops in HostExecution.cpp. The element-wise fast path below sizes
// the results of common element-wise ops without PyTorch's generic kernel.
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "aten/OpTraits.h"
#include "aten/Unsigned.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Metrics.h"
#include "runtime/OpenMP.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_has_compatible_shallow_copy_type_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/mode.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/Context.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sigmoid_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/tanh_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/exp_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/sqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/rsqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/neg_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/log_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/sin_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/cos_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/reciprocal_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/silu_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/erf_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/exp2_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/log1p_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/expm1_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace torchtpu::aten {

// ---------------------------------------------------------------------------------------------
// The kernel entry (Entry.h)

namespace {
std::atomic<EntryHook> g_entry_hook{nullptr};
thread_local int t_kernel_depth = 0;
thread_local bool t_call_warned = false;
}  // namespace

DeterministicAlgorithms::Setting DeterministicAlgorithms::Setting::now() {
  const auto& context = at::globalContext();
  return {context.deterministicAlgorithms(), context.deterministicAlgorithmsWarnOnly()};
}
DeterministicAlgorithms::DeterministicAlgorithms(Setting setting) {
  const Setting current = Setting::now();
  if (current.on == setting.on && current.warn_only == setting.warn_only) return;
  previous_ = current;
  at::globalContext().setDeterministicAlgorithms(setting.on, setting.warn_only);
}
DeterministicAlgorithms::~DeterministicAlgorithms() {
  if (previous_) at::globalContext().setDeterministicAlgorithms(previous_->on, previous_->warn_only);
}

bool call_warned() { return t_call_warned; }
void set_call_warned(bool warned) { t_call_warned = warned; }

void set_entry_hook(EntryHook hook) { g_entry_hook.store(hook); }
EntryHook entry_hook() { return g_entry_hook.load(std::memory_order_acquire); }
bool inside_kernel() { return t_kernel_depth > 0; }
KernelScope::KernelScope() { ++t_kernel_depth; }
KernelScope::~KernelScope() {
  if (--t_kernel_depth == 0) runtime::release_openmp_team();
}

// ---------------------------------------------------------------------------------------------
// Launching device work (Launch.h)

std::optional<std::tuple<at::Tensor, at::Tensor>> dropout_on_device(const at::Tensor& input,
                                                                     double p,
                                                                     std::optional<bool> train) {
  if ((train.has_value() && !*train) || !(p > 0 && p < 1) || input.numel() == 0 ||
      !at::isFloatingType(input.scalar_type()) || !input.device().is_privateuseone()) {
    return std::nullopt;
  }
  const at::AutoDispatchBelowADInplaceOrView below_autograd;  // as inside a kernel
  at::Tensor noise = at::empty_like(input);  // laid out like the input, as on the CPU
  noise.bernoulli_(1 - p);
  at::Tensor output = input.mul(noise.mul(1 / (1 - p)));
  return std::make_tuple(std::move(output), noise.to(at::kBool));
}

void wait_for_device(c10::Device device) {
  // (In debug eager too: work queued by strict ops of this or another thread runs first.)
  runtime::synchronize_device(device.index());
}

void check_results(const std::string& op, const std::vector<at::Tensor>& results) {
  if (!runtime::check_nans()) return;
  for (const auto& t : results) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    TORCH_CHECK(host_alias(t).isfinite().all().item<bool>(),
                "TORCHTPU_CHECK_NANS: ", op, " produced NaN or Inf (the first op to do so) on ",
                t.device());
  }
}

namespace {
thread_local std::string t_launch_note;
}  // namespace

LaunchNote::LaunchNote(std::string note) : previous_(std::move(t_launch_note)) {
  t_launch_note = std::move(note);
}
LaunchNote::~LaunchNote() { t_launch_note = std::move(previous_); }

bool launch_here_if_idle(c10::Device device, const std::string& op,
                         c10::function_ref<void()> work, bool parallel) {
  if (!runtime::asynchronous() || sim::tracing() || runtime::check_nans()) return false;
  auto& queue = runtime::queue_of(runtime::current_stream(device.index()));
  if (t_launch_note.empty()) return queue.run_here_if_idle(work, op, parallel);
  return queue.run_here_if_idle(work, op + t_launch_note, parallel);
}

void launch(c10::Device device, std::string op, std::function<void()> work,
            std::vector<at::Tensor> results, bool parallel) {
  if (sim::tracing()) {
    // torch.profiler records the device: the launch's event (traced when it was charged, under
    // the same name) gets the host time its work takes on this machine as an annotation.
    if (auto slot = sim::take_host_time_slot(op)) {
      work = [work = std::move(work), slot = std::move(slot)] {
        const auto start = std::chrono::steady_clock::now();
        work();
        slot->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count());
      };
    }
  }
  if (!t_launch_note.empty()) op += t_launch_note;
  if (runtime::asynchronous()) {
    if (runtime::check_nans() && !results.empty()) {
      // Strict eager checks on the stream, after the work: the first op that made a NaN or Inf
      // is reported at the next synchronization (the first error a stream keeps).
      work = [work = std::move(work), op, results = std::move(results)] {
        work();
        check_results(op, results);
      };
    }
    runtime::queue_of(runtime::current_stream(device.index()))
        .enqueue(std::move(work), std::move(op), {}, parallel);
    return;
  }
  // Debug eager runs the work now, after whatever strict ops (of another thread, or before a
  // mode switch) queued on the device.
  wait_for_device(device);
  {
    const runtime::metrics::HostTime timed(op);
    work();
  }
  check_results(op, results);
}

namespace {

using runtime::metrics::count;

// The names the own kernels charge their launches under.
constexpr char kCopyFrom[] = "aten::_copy_from";
constexpr char kArange[] = "aten::arange";
constexpr char kFill[] = "aten::fill_";
constexpr char kHistc[] = "aten::histc";
constexpr char kRandom[] = "aten::random";
constexpr char kZero[] = "aten::zero_";

// Charges a launch of `op` that writes `t` (and reads `reads` more bytes) to the cost model, at
// the op's VPU units (OpTraits, found once per op: a static of the template).
template <const char* op>
void charge_vector(const at::Tensor& t, double reads = 0) {
  static const double units = op_traits(op).vpu_units;
  const double bytes =
      sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size())) + reads;
  sim::record(op, sim::cost_model().vector(t.numel(), units, bytes));
}

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
// Random fills with the device generator (see runtime/Generator.h).

// Random fills: the VPU's generator plus the distribution's transform (an assumed 4 units).
template <typename Fill>
at::Tensor& random_fill(at::Tensor& self, const std::optional<at::Generator>& gen, Fill&& fill) {
  at::Generator g = gen.has_value() && gen->defined()
                        ? *gen
                        : runtime::default_generator(self.device().index());
  auto* impl = at::check_generator<runtime::GeneratorImpl>(g);
  // The generator's state advances by what the kernel draws, known only once it ran: random
  // fills run on the calling thread, after the queued work.
  wait_for_device(self.device());
  std::lock_guard<std::mutex> lock(g.mutex());
  at::Generator host = impl->host_copy();
  auto alias = host_alias(self);
  fill(alias, host);
  impl->assign_from_host(host);
  charge_vector<kRandom>(self);
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.normal_(mean, std, g); });
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.uniform_(from, to, g); });
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.bernoulli_(p, g); });
}

// native_dropout: the mask from the device generator (Launch.h), the other cases as the CPU
// kernel computes them.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (auto decomposed = dropout_on_device(input, p, train)) return *decomposed;
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(input.numel() == 0 || at::isFloatingType(input.scalar_type()),
              "dropout: expected a floating-point input on ", input.device(), ", got ",
              input.scalar_type());
  if (input.numel() == 0) return {input, at::empty_like(input)};
  // p = 0 or p = 1 (nn.functional.dropout does not send these here): the same decomposition.
  const double keep = 1 - p;
  at::Tensor noise = at::empty_like(input);
  noise.bernoulli_(keep);
  return {input.mul(noise.mul(keep == 0 ? 0.0 : 1 / keep)), noise.to(at::kBool)};
}

// one_hot: PyTorch's composite checks the class values only on the CPU and CUDA; elsewhere a bad
// value surfaces as scatter's index error. Here it is checked as on those devices (a host read,
// as CUDA's check is), with their messages.
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

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.random_(g); });
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.random_(to, g); });
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> gen) {
  return random_fill(self, gen,
                     [&](at::Tensor& t, at::Generator& g) { t.random_(from, to, g); });
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  return random_fill(self, gen,
                     [&](at::Tensor& t, at::Generator& g) { t.exponential_(lambd, g); });
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
// Batch norm. native_batch_norm updates running_mean/running_var in place although its schema
// does not mark them as written, so the copying CPU fallback would lose the update. It runs on
// host aliases instead, which write the running statistics straight into device memory.

std::optional<at::Tensor> host_alias_opt(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return host_alias(*t);
}

const at::Tensor* ptr_of(const std::optional<at::Tensor>& t) {
  return t.has_value() ? &*t : nullptr;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  wait_for_device(input.device());
  check_same_device("aten::native_batch_norm", {&input, ptr_of(weight), ptr_of(bias),
                                                ptr_of(running_mean), ptr_of(running_var)});
  auto [out, save_mean, save_invstd] = at::native_batch_norm(
      host_alias(input), host_alias_opt(weight), host_alias_opt(bias),
      host_alias_opt(running_mean), host_alias_opt(running_var), training, momentum, eps);
  // In inference the CPU returns empty saved statistics, and every other device the running
  // mean and inverse standard deviation, per channel: PyTorch's meta function and decomposition
  // give those for any device but the CPU (so fake tensors and compiled graphs expect them).
  if (!training && running_mean.has_value() && running_mean->defined() &&
      running_var.has_value() && running_var->defined() && save_mean.numel() == 0) {
    const c10::ScalarType accumulate = at::toOpMathType(input.scalar_type());
    save_mean = host_alias(*running_mean).to(accumulate, /*non_blocking=*/false, /*copy=*/true);
    save_invstd = host_alias(*running_var).to(accumulate).add(eps).rsqrt();
  }
  const auto device = input.device();
  return {on_device(out, device), on_device(save_mean, device), on_device(save_invstd, device)};
}

// The running-statistics overload is native_batch_norm under another name (the CPU fallback
// would give it the CPU's empty saved statistics in inference).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps) {
  return (native_batch_norm)(input, weight, bias, std::optional<at::Tensor>(running_mean),
                             std::optional<at::Tensor>(running_var), training, momentum, eps);
}

// The out= overloads: the same results (the per-channel statistics in inference included), into
// the given tensors, resized as the CPU resizes out= tensors.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_into(
    std::tuple<at::Tensor, at::Tensor, at::Tensor> results, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  at::Tensor* outs[] = {&out, &save_mean, &save_invstd};
  const at::Tensor* values[] = {&std::get<0>(results), &std::get<1>(results),
                                &std::get<2>(results)};
  for (int i = 0; i < 3; ++i) {
    TORCH_CHECK(outs[i]->scalar_type() == values[i]->scalar_type(),
                "Expected out tensor to have dtype ", values[i]->dtype(), ", but got ",
                outs[i]->dtype(), " instead");
    at::native::resize_output(*outs[i], values[i]->sizes());
    outs[i]->copy_(*values[i]);
  }
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
    at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  check_same_device("aten::native_batch_norm", {&input, &out, &save_mean, &save_invstd});
  return batch_norm_into((native_batch_norm)(input, weight, bias, running_mean, running_var,
                                             training, momentum, eps),
                         out, save_mean, save_invstd);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  check_same_device("aten::_native_batch_norm_legit", {&input, &out, &save_mean, &save_invstd});
  return batch_norm_into(native_batch_norm_legit(input, weight, bias, running_mean, running_var,
                                                 training, momentum, eps),
                         out, save_mean, save_invstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask) {
  wait_for_device(input.device());
  check_same_device("aten::native_batch_norm_backward",
                    {&grad_out, &input, ptr_of(weight), ptr_of(running_mean),
                     ptr_of(running_var), ptr_of(save_mean), ptr_of(save_invstd)});
  auto [gi, gw, gb] = at::native_batch_norm_backward(
      host_alias(grad_out), host_alias(input), host_alias_opt(weight),
      host_alias_opt(running_mean), host_alias_opt(running_var), host_alias_opt(save_mean),
      host_alias_opt(save_invstd), train, eps, output_mask);
  const auto device = input.device();
  return {on_device(gi, device), on_device(gw, device), on_device(gb, device)};
}

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
// Element-wise ops of TPU tensors of one floating dtype, one shape and contiguous strides (add,
// sub, mul and div of two such tensors or of one and a Python number; the structured unary
// float ops): the result is a contiguous tensor of that shape and dtype, made here without the
// TensorIterator that PyTorch's generic kernel of the functional and in-place variants builds
// over device tensors to find it (about 2 us an op: docs/host-speed.md); the out= kernel then
// runs, queued or recorded, as it would after that generic kernel. Any other call goes to that
// generic kernel itself (at::compositeexplicitautogradnonfunctional), with its checks and errors.
bool dense_float(const at::Tensor& self) {
  const c10::ScalarType dtype = self.scalar_type();
  const bool floating = dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf ||
                        dtype == c10::kDouble;
  // Exactly the contiguous strides (size-1 dimensions too: TensorIterator orders dimensions by
  // stride), no conjugate or negative bit, not empty (TensorIterator gives an empty result
  // other strides: (0, 1, 0) for x + 1 of shape (2, 0, 1)).
  return floating && self.numel() != 0 &&
         self.strides().equals(c10::contiguous_strides(self.sizes())) && !self.is_neg() &&
         !self.is_conj();
}
// A Python number the binding wrapped (a 0-dim CPU tensor): it takes the tensor's dtype, unless
// it is complex.
bool wrapped_real_number(const at::Tensor& other) {
  return other.is_cpu() && other.dim() == 0 && other.unsafeGetTensorImpl()->is_wrapped_number() &&
         !c10::isComplexType(other.scalar_type());
}
bool same_dense_floats(const at::Tensor& self, const at::Tensor& other) {
  if (!self.is_privateuseone() || !dense_float(self)) return false;
  if (wrapped_real_number(other)) return true;
  return other.scalar_type() == self.scalar_type() && other.is_privateuseone() &&
         other.device() == self.device() && self.sizes().equals(other.sizes()) &&
         dense_float(other);
}
// In place: `other` is another storage, or the same elements of this one (TensorIterator refuses
// a partial overlap). (Storages are compared by identity: a pending storage of fused eager has
// no memory to compare yet.)
bool same_dense_floats_in_place(const at::Tensor& self, const at::Tensor& other) {
  return same_dense_floats(self, other) &&
         (self.storage().unsafeGetStorageImpl() != other.storage().unsafeGetStorageImpl() ||
          self.storage_offset() == other.storage_offset());
}
// (A complex or boolean alpha is refused by the generic kernel's checks: it goes there.)
bool plain_alpha(const c10::Scalar& alpha) { return !alpha.isComplex() && !alpha.isBoolean(); }

// add and sub (with alpha), mul and div: the functional and in-place variants, by the generic
// kernels they fall back to and the out= op they call.
using GenericAlpha = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const c10::Scalar&);
using GenericAlphaInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const c10::Scalar&);
using Generic = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
using GenericInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&);

template <GenericAlpha generic, class Out>
at::Tensor dense_with_alpha(const at::Tensor& self, const at::Tensor& other,
                            const c10::Scalar& alpha) {
  if (!same_dense_floats(self, other) || !plain_alpha(alpha)) return generic(self, other, alpha);
  at::Tensor out = at::empty(self.sizes(), self.options());
  Out::call(self, other, alpha, out);
  return out;
}
template <GenericAlphaInPlace generic, class Out>
at::Tensor& dense_with_alpha_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (!same_dense_floats_in_place(self, other) || !plain_alpha(alpha)) {
    return generic(self, other, alpha);
  }
  Out::call(self, other, alpha, self);
  return self;
}
template <Generic generic, class Out>
at::Tensor dense(const at::Tensor& self, const at::Tensor& other) {
  if (!same_dense_floats(self, other)) return generic(self, other);
  at::Tensor out = at::empty(self.sizes(), self.options());
  Out::call(self, other, out);
  return out;
}
template <GenericInPlace generic, class Out>
at::Tensor& dense_(at::Tensor& self, const at::Tensor& other) {
  if (!same_dense_floats_in_place(self, other)) return generic(self, other);
  Out::call(self, other, self);
  return self;
}

#define TORCHTPU_UNARY_FLOAT_OP(op)                                     \
  at::Tensor op##_dense(const at::Tensor& self) {                       \
    if (!dense_float(self)) {                                           \
      return at::compositeexplicitautogradnonfunctional::op(self);      \
    }                                                                   \
    at::Tensor out = at::empty(self.sizes(), self.options());           \
    at::_ops::op##_out::call(self, out);                                \
    return out;                                                         \
  }                                                                     \
  at::Tensor& op##_dense_(at::Tensor& self) {                           \
    if (!dense_float(self)) {                                           \
      return at::compositeexplicitautogradnonfunctional::op##_(self);   \
    }                                                                   \
    at::_ops::op##_out::call(self, self);                               \
    return self;                                                        \
  }
TORCHTPU_UNARY_FLOAT_OP(sigmoid)
TORCHTPU_UNARY_FLOAT_OP(tanh)
TORCHTPU_UNARY_FLOAT_OP(exp)
TORCHTPU_UNARY_FLOAT_OP(sqrt)
TORCHTPU_UNARY_FLOAT_OP(rsqrt)
TORCHTPU_UNARY_FLOAT_OP(neg)
TORCHTPU_UNARY_FLOAT_OP(log)
TORCHTPU_UNARY_FLOAT_OP(sin)
TORCHTPU_UNARY_FLOAT_OP(cos)
TORCHTPU_UNARY_FLOAT_OP(reciprocal)
TORCHTPU_UNARY_FLOAT_OP(silu)
TORCHTPU_UNARY_FLOAT_OP(erf)
TORCHTPU_UNARY_FLOAT_OP(exp2)
TORCHTPU_UNARY_FLOAT_OP(log1p)
TORCHTPU_UNARY_FLOAT_OP(expm1)
#undef TORCHTPU_UNARY_FLOAT_OP

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
  m.impl("normal_", entry(TORCH_FN(normal_), Capture::random));
  m.impl("uniform_", entry(TORCH_FN(uniform_), Capture::random));
  m.impl("bernoulli_.float", entry(TORCH_FN(bernoulli_float_), Capture::random));
  m.impl("random_", entry(TORCH_FN(random_), Capture::random));
  m.impl("random_.to", entry(TORCH_FN(random_to_), Capture::random));
  m.impl("random_.from", entry(TORCH_FN(random_from_), Capture::random));
  m.impl("exponential_", entry(TORCH_FN(exponential_), Capture::random));
  m.impl("native_dropout", entry(TORCH_FN(native_dropout), Capture::random));
  m.impl("one_hot", entry(TORCH_FN(one_hot), Capture::none));
  m.impl("record_stream", entry(TORCH_FN(record_stream), Capture::view));
  m.impl("histc", entry(TORCH_FN(histc), Capture::none));
  m.impl("mode.values", entry(TORCH_FN(mode_values), Capture::none));
  m.impl("mse_loss", entry(TORCH_FN(mse_loss), Capture::new_results));
  m.impl("native_batch_norm", entry(TORCH_FN(native_batch_norm), Capture::none));
  m.impl("_native_batch_norm_legit", entry(TORCH_FN(native_batch_norm_legit), Capture::none));
  m.impl("native_batch_norm.out", entry(TORCH_FN(native_batch_norm_out), Capture::none));
  m.impl("_native_batch_norm_legit.out",
         entry(TORCH_FN(native_batch_norm_legit_out), Capture::none));
  m.impl("native_batch_norm_backward", entry(TORCH_FN(native_batch_norm_backward), Capture::none));
  // (Composites: not entries. The out= kernels they call are: counted, checked, recorded.)
  namespace generic = at::compositeexplicitautogradnonfunctional;
  m.impl("add.Tensor", TORCH_FN((dense_with_alpha<&generic::add, at::_ops::add_out>)));
  m.impl("add_.Tensor", TORCH_FN((dense_with_alpha_<&generic::add_, at::_ops::add_out>)));
  m.impl("sub.Tensor", TORCH_FN((dense_with_alpha<&generic::sub, at::_ops::sub_out>)));
  m.impl("sub_.Tensor", TORCH_FN((dense_with_alpha_<&generic::sub_, at::_ops::sub_out>)));
  m.impl("mul.Tensor", TORCH_FN((dense<&generic::mul, at::_ops::mul_out>)));
  m.impl("mul_.Tensor", TORCH_FN((dense_<&generic::mul_, at::_ops::mul_out>)));
  m.impl("div.Tensor", TORCH_FN((dense<&generic::div, at::_ops::div_out>)));
  m.impl("div_.Tensor", TORCH_FN((dense_<&generic::div_, at::_ops::div_out>)));
  m.impl("sigmoid", TORCH_FN(sigmoid_dense));
  m.impl("sigmoid_", TORCH_FN(sigmoid_dense_));
  m.impl("tanh", TORCH_FN(tanh_dense));
  m.impl("tanh_", TORCH_FN(tanh_dense_));
  m.impl("exp", TORCH_FN(exp_dense));
  m.impl("exp_", TORCH_FN(exp_dense_));
  m.impl("sqrt", TORCH_FN(sqrt_dense));
  m.impl("sqrt_", TORCH_FN(sqrt_dense_));
  m.impl("rsqrt", TORCH_FN(rsqrt_dense));
  m.impl("rsqrt_", TORCH_FN(rsqrt_dense_));
  m.impl("neg", TORCH_FN(neg_dense));
  m.impl("neg_", TORCH_FN(neg_dense_));
  m.impl("log", TORCH_FN(log_dense));
  m.impl("log_", TORCH_FN(log_dense_));
  m.impl("sin", TORCH_FN(sin_dense));
  m.impl("sin_", TORCH_FN(sin_dense_));
  m.impl("cos", TORCH_FN(cos_dense));
  m.impl("cos_", TORCH_FN(cos_dense_));
  m.impl("reciprocal", TORCH_FN(reciprocal_dense));
  m.impl("reciprocal_", TORCH_FN(reciprocal_dense_));
  m.impl("silu", TORCH_FN(silu_dense));
  m.impl("silu_", TORCH_FN(silu_dense_));
  m.impl("erf", TORCH_FN(erf_dense));
  m.impl("erf_", TORCH_FN(erf_dense_));
  m.impl("exp2", TORCH_FN(exp2_dense));
  m.impl("exp2_", TORCH_FN(exp2_dense_));
  m.impl("log1p", TORCH_FN(log1p_dense));
  m.impl("log1p_", TORCH_FN(log1p_dense_));
  m.impl("expm1", TORCH_FN(expm1_dense));
  m.impl("expm1_", TORCH_FN(expm1_dense_));
}

}  // namespace torchtpu::aten
