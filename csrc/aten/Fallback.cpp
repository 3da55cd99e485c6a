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
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace torchtpu::aten {
namespace {

FallbackMode mode_from_env() {
  auto v = runtime::env::get("TORCHTPU_FALLBACK").value_or("warn");
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

}  // namespace torchtpu::aten
