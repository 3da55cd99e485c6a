// The decision of fused eager for an op entering (Recording.h): record it, or run it now after
// the recorded work it touches; factories and dropout, recorded without a graph break; the op
// classification the decision reads.
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/Unsigned.h"
#include "defer/Recording.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "sim/Mxu.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/strides.h>

#include <algorithm>

namespace torchtpu::defer {

using aten::Capture;
using runtime::FlushReason;

namespace {

// Matmuls are recorded when their operands share an MXU dtype (integers included: int8 passes,
// sim/Mxu.h): other dtypes are fallbacks or errors, which must happen at the op (as in strict
// eager), not when the graph runs.
bool mxu_recordable(const aten::OpTraits& traits, c10::ArrayRef<c10::IValue> args) {
  if (traits.unit != aten::OpUnit::mxu) return true;
  std::optional<c10::ScalarType> dtype;
  bool ok = true;
  for (const c10::IValue& v : args) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) continue;
    if (dtype && *dtype != t.scalar_type()) ok = false;
    dtype = t.scalar_type();
  }
  if (!ok || !dtype) return false;
  if (traits.integer_operands) return *dtype == c10::kChar || *dtype == c10::kInt;
  return sim::mxu_supports(*dtype);
}

}  // namespace

// The largest tensor of an in-place foreach op recorded as one node (a fused region's block:
// docs/eager-modes.md, "Foreach ops").
constexpr int64_t kForeachNodeMaxElements = 32768;

// Whether fused eager records this foreach op as one node, run at the flush as strict eager runs
// it (one launch over its lists), rather than as its per-tensor ops: an in-place op whose
// tensors are all in lists, dense, on the device and no larger than a fused region's block, and
// that writes two tensors or more (over one, it would pass for an element-wise op the fusion
// passes run by blocks; recorded per tensor, it is that op).
// Fusing a parameter's update chain saves passes over memory only where the tensors are larger
// than a block (the MLP step of benchmarks/eager_modes.py); over small ones each per-tensor op
// costs its recording and flush and saves nothing (a small model's AdamW records eight ops per
// parameter; docs/host-speed.md, "Foreach ops as one launch").
bool foreach_as_one_node(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  if (!schema.returns().empty()) return false;  // (a functional one makes new lists)
  const size_t num_args = schema.arguments().size();
  const auto args = stack.end() - num_args;
  // (Its first argument is the list it writes.)
  if (!args->isTensorList() || args->toTensorList().size() < 2) return false;
  for (auto it = args; it != stack.end(); ++it) {
    // (A scalar given as a tensor is read by the kernel, .item(): per tensor, as recorded ops.)
    if (it->isTensor()) return false;
    if (!it->isTensorList()) continue;
    for (const at::Tensor& t : it->toTensorList()) {
      if (!t.defined() || !t.device().is_privateuseone() || t.layout() != c10::kStrided ||
          t.numel() > kForeachNodeMaxElements) {
        return false;
      }
    }
  }
  return true;
}

// A random op that fills its arguments (bernoulli_, normal_, ...), rather than returning new
// tensors.
bool random_op_writes_arguments(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite()) return true;
  }
  return false;
}

// native_dropout(input, p, train) in training, recorded without a graph break: its mask is
// drawn at once into a fresh tensor (a random op that touches nothing pending runs in program
// order without flushing), and the rest is recorded as element-wise ops: the decomposition that
// the strict and debug kernel runs too (aten::dropout_on_device), so every mode gives the same
// numbers for one seed.
bool record_dropout(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 3);
  if (!args[0].isTensor()) return false;
  auto decomposed = aten::dropout_on_device(args[0].toTensor(), args[1].toDouble(),
                                            args[2].toOptional<bool>());
  if (!decomposed) return false;
  TORCHTPU_COUNT("defer.dropouts_recorded");
  torch::jit::drop(*stack, 3);
  stack->push_back(std::move(std::get<0>(*decomposed)));
  stack->push_back(std::move(std::get<1>(*decomposed)));
  return true;
}

// Factories: a tensor over a pending storage, unless the allocator must see the request now (an
// empty tensor, a request larger than the HBM, memory pressure: out of memory at the op).
bool record_factory(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    const std::string& name) {
  // empty.memory_format(size, dtype, layout, device, pin_memory, memory_format)
  // empty_strided(size, stride, dtype, layout, device, pin_memory)
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const bool strided = num_args == 6 && schema.arguments()[1].name() == "stride";
  auto args = torch::jit::last(*stack, num_args);
  const size_t k = strided ? 2 : 1;
  const auto dtype = args[k].toOptional<c10::ScalarType>();
  const auto layout = args[k + 1].toOptional<c10::Layout>();
  auto device = args[k + 2].toOptional<c10::Device>();
  const auto pin = args[k + 3].toOptional<bool>();
  if (c10::layout_or_default(layout) != c10::Layout::Strided || pin.value_or(false)) return false;
  const at::DimVector size = args[0].toDimVector();
  at::DimVector strides;
  c10::ScalarType scalar_type = c10::dtype_or_default(dtype);
  size_t nbytes = 0;
  const auto format = strided ? std::nullopt : args[5].toOptional<c10::MemoryFormat>();
  const bool plain = !strided && format.value_or(c10::MemoryFormat::Contiguous) ==
                                     c10::MemoryFormat::Contiguous;
  if (plain && std::all_of(size.begin(), size.end(), [](int64_t n) { return n >= 0; })) {
    // (The result of an element-wise op's generic kernel: contiguous, sized here.)
    strides = c10::contiguous_strides(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, c10::elementSize(scalar_type));
  } else {
    at::Tensor meta;
    if (strided) {
      meta = at::detail::empty_strided_meta(size, args[1].toDimVector(), dtype, std::nullopt,
                                            std::nullopt, std::nullopt);
    } else {
      meta = at::detail::empty_meta(size, dtype, std::nullopt, std::nullopt, std::nullopt,
                                    format);
    }
    strides.assign(meta.strides().begin(), meta.strides().end());
    scalar_type = meta.scalar_type();
    nbytes = meta.storage().nbytes();
  }
  if (nbytes == 0 || static_cast<int64_t>(nbytes) > runtime::hbm_capacity_bytes()) return false;
  c10::Device d = c10::device_or_default(device);
  if (!d.has_index()) d = c10::Device(c10::kPrivateUse1, runtime::current_device());
  if (d.index() >= runtime::device_count()) return false;  // the kernel raises
  if (memory_pressure(d, nbytes)) return false;  // allocated now: out of memory at the op
  runtime::metrics::add_lasting(runtime::metrics::Category::op, name);  // (recorded)
  at::Tensor t = make_pending_tensor(d, size, strides, scalar_type, nbytes);
  torch::jit::drop(*stack, num_args);
  stack->push_back(std::move(t));
  return true;
}

// Why the op entering now was made to run at once (runtime::OpModeScope::run_synchronously).
FlushReason forced_reason() {
  return aten::unsigned_at_once() ? FlushReason::unsigned_at_once : FlushReason::argument_check;
}

Decision decide(const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
                const std::string& name, const aten::OpTraits& traits) {
  Decision d;
  if (runtime::OpModeScope::forced()) {  // (met here while capturing a program)
    d.run_now = forced_reason();
    return d;
  }
  switch (capture) {
    case Capture::host_read: d.run_now = FlushReason::host_read; return d;
    case Capture::random: d.run_now = FlushReason::random_op; return d;
    case Capture::fallback: d.run_now = FlushReason::cpu_fallback; return d;
    case Capture::none: d.run_now = FlushReason::unknown_op; return d;
    default: break;
  }
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  if (capture == Capture::copy) {
    const at::Tensor& src = args[0].toTensor();
    const at::Tensor& dst = args[1].toTensor();
    const bool src_tpu = src.device().is_privateuseone();
    const bool dst_tpu = dst.device().is_privateuseone();
    if (!(src_tpu && dst_tpu && src.device() == dst.device() && dst.numel() > 0)) {
      d.run_now = dst_tpu && !src_tpu ? FlushReason::host_to_device_copy : FlushReason::host_read;
      return d;
    }
  }
  // (raises CUDA's device-mismatch error)
  const auto device = aten::common_device(name, args, op.schema());
  if (!device.has_value() || !device->is_privateuseone()) {
    d.run_now = FlushReason::unknown_op;
    return d;
  }
  d.device = *device;
  if (capture == Capture::results_are_arguments) {
    size_elementwise_out(schema, traits, args, *device);  // (an empty out= of an element-wise op)
    for (size_t i = 0; i < num_args; ++i) {
      if (!schema.arguments()[i].is_out()) continue;
      if (!args[i].isTensor() || args[i].toTensor().numel() == 0) {
        d.run_now = FlushReason::out_sized_by_kernel;
        return d;
      }
    }
  }
  if (!mxu_recordable(traits, args)) {
    d.run_now = FlushReason::matmul_at_once;
    return d;
  }
  if (capture != Capture::new_results) return d;
  auto meta = new_results_meta(op, stack, name, traits, &d.constants);
  if (!meta) {
    d.run_now = FlushReason::no_meta_kernel;
    return d;
  }
  d.new_results = std::move(*meta);
  return d;
}

bool has_sparse_argument(const torch::jit::Stack& stack, size_t num_args) {
  auto sparse = [](const at::Tensor& t) {
    return t.defined() && t.layout() != c10::kStrided;
  };
  for (auto it = stack.end() - num_args; it != stack.end(); ++it) {
    if (it->isTensor()) {
      if (sparse(it->toTensor())) return true;
    } else if (it->isTensorList()) {
      for (const at::Tensor& t : it->toTensorList()) {
        if (sparse(t)) return true;
      }
    }
  }
  return false;
}

}  // namespace torchtpu::defer
