// The CPU fallback for every aten op without a native TPU kernel.
//
// It checks that the op's tensors are on one device (as CUDA kernels do), counts the op in
// torchtpu.metrics, warns once per op, lends the device generator to random ops, and runs the
// CPU kernel through at::native::cpu_fallback (inputs copied to the host, outputs copied back).
// TORCHTPU_FALLBACK=error (or torchtpu.set_fallback_mode("error")) turns it into an error.
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/OpTraits.h"

#include "runtime/Device.h"
#include "runtime/Env.h"
#include "runtime/Generator.h"
#include "runtime/Log.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/Functions.h>
#include <ATen/MemoryOverlap.h>
#include "pytorch/Internals.h"
#include <torch/library.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace torchtpu::aten {
namespace {

FallbackMode mode_from_env() {
  auto v = runtime::env::value("TORCHTPU_FALLBACK");
  if (v == "warn") return FallbackMode::warn;
  if (v == "error") return FallbackMode::error;
  if (v == "silent") return FallbackMode::silent;
  runtime::log::warn("TORCHTPU_FALLBACK='" + v + "' is not one of warn, error, silent; using warn");
  return FallbackMode::warn;
}

std::atomic<FallbackMode>& mode_slot() {
  static std::atomic<FallbackMode> mode{mode_from_env()};
  return mode;
}


bool first_time(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  return seen.insert(name).second;
}

// The tensors among `values`.
void add_tensors(c10::ArrayRef<c10::IValue> values, std::vector<at::Tensor>& out) {
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
    }
  }
}

// aten::_to_cpu, which at::native::cpu_fallback calls to move the op's tpu tensors to the host.
// Each copy keeps the tensor's sizes and strides (Tensor::cpu() keeps the strides of dense
// tensors only, and makes the others contiguous), so that the CPU kernel sees the layout the op
// was given on the device: a kernel may branch on it, and a derivative formula may assume the
// branch from the device tensor (_linalg_det and _linalg_slogdet factor A^T where A is
// contiguous, and linalg_det_backward solves with A^T's factors when A is contiguous).
// A dimension of stride 0 is copied once (its other indices share the memory); a tensor whose
// strides overlap otherwise is copied as Tensor::cpu() copies it.
std::vector<at::Tensor> to_cpu_keeping_strides(at::TensorList tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.device().is_cpu() || t.layout() != c10::kStrided ||
        t.is_non_overlapping_and_dense()) {
      out.push_back(t.defined() ? t.cpu() : t);
      continue;
    }
    at::Tensor host = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU));
    at::Tensor dst = host, src = t;
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (t.stride(d) == 0 && t.size(d) > 1) {
        dst = dst.narrow(d, 0, 1);
        src = src.narrow(d, 0, 1);
      }
    }
    if (at::has_internal_overlap(dst) == at::MemOverlap::Yes) {
      out.push_back(t.cpu());
      continue;
    }
    dst.copy_(src);
    out.push_back(std::move(host));
  }
  return out;
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_name(op);
  const size_t num_args = op.schema().arguments().size();
  const auto device = common_device(name, torch::jit::last(*stack, num_args), op.schema());

  note_fallback(name);
  if (device) wait_for_device(*device);  // the CPU kernel reads device memory as of now

  std::vector<at::Tensor> tensors;
  add_tensors(torch::jit::last(*stack, num_args), tensors);
  {
    GeneratorLoan loan(op, stack, device);
    at::native::cpu_fallback(op, stack);
  }
  if (device) {
    add_tensors(torch::jit::last(*stack, op.schema().returns().size()), tensors);
    sim::record(name, estimate_fallback_op(tensors));
  }
}

}  // namespace

// See the registration for QuantizedPrivateUse1 below.
void layout_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_name(op);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t base = stack->size() - num_args;
  const auto device = common_device(name, torch::jit::last(*stack, num_args), schema);
  note_fallback(name);
  if (device) wait_for_device(*device);

  std::vector<at::Tensor> tensors;
  add_tensors(torch::jit::last(*stack, num_args), tensors);
  // The tpu tensors the op writes (by argument index), to copy the CPU's writes back into.
  std::vector<std::pair<size_t, at::Tensor>> written;
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& slot = (*stack)[base + i];
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    if (slot.isTensor() && alias != nullptr && alias->isWrite() &&
        slot.toTensor().device().is_privateuseone()) {
      written.emplace_back(i, slot.toTensor());
    }
  }
  map_tensor_arguments(stack, base, num_args, [](const at::Tensor& t) {
    return t.defined() && t.device().is_privateuseone() ? t.cpu() : t;
  });
  std::vector<at::Tensor> cpu_written;
  for (const auto& [i, t] : written) cpu_written.push_back((*stack)[base + i].toTensor());
  {
    GeneratorLoan loan(op, stack, device);
    op.callBoxed(stack);
  }
  for (size_t k = 0; k < written.size(); ++k) written[k].second.copy_(cpu_written[k]);
  if (!device) return;
  const size_t num_returns = schema.returns().size();
  const std::vector<int> returned = returned_arguments(schema);
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& slot = (*stack)[stack->size() - num_returns + r];
    if (r < returned.size() && returned[r] >= 0) {
      for (const auto& [i, t] : written) {
        if (static_cast<int>(i) == returned[r]) slot = t;  // the tpu argument it wrote
      }
    }
  }
  map_tensor_arguments(stack, stack->size() - num_returns, num_returns,
                       [&](const at::Tensor& t) {
                         return t.defined() && t.device().is_cpu() ? t.to(*device) : t;
                       });
  add_tensors(torch::jit::last(*stack, num_returns), tensors);
  sim::record(name, estimate_fallback_op(tensors));
}

// An op the CPU has a kernel for under `cpu_key` (QuantizedCPU) may resolve on tpu to a
// composite kernel (a functional op built on its out= variant), which would make a result the
// fallback cannot move. Each such op without a torchtpu kernel for `tpu_key` gets the layout
// fallback registered as its kernel, so it runs as the CPU runs it.
void route_to_layout_fallback(c10::DispatchKey cpu_key, c10::DispatchKey tpu_key) {
  static std::map<std::string, std::unique_ptr<torch::Library>> libraries;  // kept registered
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getRegistrationsForDispatchKey(cpu_key)) {
    const auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(tpu_key)) continue;
    const auto sep = name.name.find("::");
    const std::string ns = name.name.substr(0, sep);
    auto& lib = libraries[ns + "/" + c10::toString(tpu_key)];
    if (!lib) {
      lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, tpu_key, __FILE__,
                                             __LINE__);
    }
    const std::string op_name = name.name.substr(sep + 2) +
                                (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(op_name.c_str(), entry_boxed<&layout_fallback>(Capture::fallback));
  }
}

// The device of the op, from its tensor arguments, with CUDA's rule: all tensors on one device,
// except 0-dim CPU tensors, which act as scalars, and CPU index tensors of the advanced-indexing
// ops (x[idx] and x[idx] = v with idx on the CPU work on CUDA: PyTorch moves the indices).
std::optional<c10::Device> common_device(const std::string& name,
                                         c10::ArrayRef<c10::IValue> args,
                                         const c10::FunctionSchema& schema) {
  std::optional<c10::Device> tpu;
  std::optional<c10::Device> cpu_nonscalar;
  // (looked at only when a list holds a CPU tensor: no lookup on the common path)
  auto takes_cpu_indices = [&name] { return op_traits(name).takes_cpu_indices; };
  bool in_list = false, written = false;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    const auto d = t.device();
    if (in_list && d.is_cpu() && takes_cpu_indices()) return;
    if (d.is_privateuseone()) {
      TORCH_CHECK(!tpu || *tpu == d,
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, ", *tpu, " and ", d, "! (in ", name, ")");
      tpu = d;
    } else if (written || !(d.is_cpu() && t.dim() == 0)) {
      cpu_nonscalar = d;
    }
  };
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& arg = args[i];
    const c10::AliasInfo* alias = i < arguments.size() ? arguments[i].alias_info() : nullptr;
    written = alias != nullptr && alias->isWrite();
    if (arg.isTensor()) {
      visit(arg.toTensor());
    } else if (arg.isTensorList()) {
      for (const at::Tensor& t : arg.toTensorList()) visit(t);
    } else if (arg.isList()) {
      in_list = true;
      for (const c10::IValue& item : arg.toListRef()) {
        if (item.isTensor()) visit(item.toTensor());
      }
      in_list = false;
    }
  }
  TORCH_CHECK(!(tpu && cpu_nonscalar),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              *tpu, " and ", *cpu_nonscalar, "! (in ", name, ")");
  if (!tpu) {
    for (const auto& arg : args) {
      if (arg.isDevice() && arg.toDevice().is_privateuseone()) {
        const c10::Device d = arg.toDevice();  // "tpu" without an index: the current device
        return d.has_index() ? d : runtime::tpu_device(runtime::current_device());
      }
    }
  }
  return tpu;
}

static bool is_generator_argument(const c10::Argument& argument) {
  auto type = argument.type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  return type->kind() == c10::TypeKind::GeneratorType;
}

GeneratorLoan::GeneratorLoan(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                             std::optional<c10::Device> device) {
  const auto& schema_args = op.schema().arguments();
  const size_t num_args = schema_args.size();
  const size_t base = stack->size() - num_args;
  for (size_t i = 0; i < num_args; ++i) {
    if (!is_generator_argument(schema_args[i])) continue;
    c10::IValue& slot = (*stack)[base + i];
    at::Generator gen;
    if (slot.isGenerator()) {
      gen = slot.toGenerator();
      if (!gen.device().is_privateuseone()) continue;  // a CPU generator: the CPU kernel checks it
    } else {
      gen = runtime::default_generator(device ? device->index() : runtime::current_device());
    }
    auto* impl = at::check_generator<runtime::GeneratorImpl>(gen);
    gen.mutex().lock();
    at::Generator host = impl->host_copy();
    slot = c10::IValue(host);
    lent_.emplace_back(gen, host);
  }
}

GeneratorLoan::~GeneratorLoan() {
  for (auto& [gen, host] : lent_) {
    gen.get<runtime::GeneratorImpl>()->assign_from_host(host);
    gen.mutex().unlock();
  }
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void note_fallback(const std::string& name, const char* why) {
  const FallbackMode mode = fallback_mode();
  TORCH_CHECK_NOT_IMPLEMENTED(
      mode != FallbackMode::error, "The operator '", name,
      "' has no native TPU kernel and the CPU fallback is disabled (TORCHTPU_FALLBACK=error). "
      "Move its inputs to the CPU for this op, or allow the fallback with "
      "torchtpu.set_fallback_mode(\"warn\").");
  runtime::metrics::count_fallback(name);
  if (mode == FallbackMode::warn && first_time(name)) {
    TORCH_WARN("The operator '", name, "' ",
               why != nullptr ? why
                              : "has no native TPU kernel yet and runs on the CPU through the "
                                "fallback, with copies to and from the device.",
               " It is counted in torchtpu.metrics; TORCHTPU_FALLBACK=error makes it an error. "
               "(Warned once per operator.)");
  }
}

sim::Estimate estimate_fallback_op(const std::vector<at::Tensor>& tensors) {
  // Priced as if native (docs/insight.md): one VPU launch over its tensors at one VPU unit per
  // vreg (the cheapest element-wise op), flagged as priced as native.
  int64_t elements = 0;
  double bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    elements = std::max<int64_t>(elements, t.numel());
    bytes += sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size()));
  }
  sim::Estimate e = sim::cost_model().vector(elements, 1.0, bytes);
  e.work.priced_as_native = true;
  return e;
}

FallbackMode fallback_mode() { return mode_slot().load(std::memory_order_relaxed); }

void set_fallback_mode(FallbackMode mode) { mode_slot().store(mode); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(entry_boxed<&fallback>(Capture::fallback));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_cpu", entry(TORCH_FN(to_cpu_keeping_strides), Capture::none));
}

// Ops on quantized tpu tensors without a kernel of Quantized.cpp. PyTorch's cpu_fallback
// redispatches to the dense CPU kernel, which is not the quantized one: this fallback moves the
// tpu tensors to the CPU as they are (a quantized tensor with its quantization, through
// Quantized.cpp's copies), calls the op through the whole dispatcher, copies what the op wrote
// into its tpu arguments back into them and moves new results to the device. Counted as any
// fallback.
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(entry_boxed<&layout_fallback>(Capture::fallback));
}

}  // namespace torchtpu::aten
