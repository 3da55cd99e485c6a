#include "aten/DryRun.h"

#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "runtime/Allocator.h"
#include "runtime/Metrics.h"

#include <ATen/EmptyTensor.h>
#include "pytorch/Internals.h"
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>

namespace torchtpu::aten {

// A meta tensor with the geometry of a TPU tensor (others stay as they are).
at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  return at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type(), std::nullopt,
                                        std::nullopt, std::nullopt);
}


// Runs the op's meta kernel on `meta` (its arguments, TPU tensors already made meta), leaving
// its returns there.
void call_meta(const c10::OperatorHandle& op, torch::jit::Stack& meta) {
  const std::string_view name = op.schema().name();
  {
    if (name == "aten::convolution_overrideable") {
      // (Its own meta kernel only says "not implemented": the output of the generic
      // convolution on meta tensors is the same.)
      at::Tensor out = at::convolution(meta[0].toTensor(), meta[1].toTensor(),
                                       meta[2].toOptional<at::Tensor>(), meta[3].toIntVector(),
                                       meta[4].toIntVector(), meta[5].toIntVector(),
                                       meta[6].toBool(), meta[7].toIntVector(), meta[8].toInt());
      meta.clear();
      meta.emplace_back(std::move(out));
    } else if (name == "aten::convolution_backward_overrideable") {
      const at::Tensor& w = meta[2].toTensor();
      const bool transposed = meta[6].toBool();
      const int64_t groups = meta[8].toInt();
      const std::vector<int64_t> bias_sizes{transposed ? w.size(1) * groups : w.size(0)};
      const auto mask = meta[9].to<std::vector<bool>>();
      auto [gi, gw, gb] = at::convolution_backward(
          meta[0].toTensor(), meta[1].toTensor(), w, bias_sizes, meta[3].toIntVector(),
          meta[4].toIntVector(), meta[5].toIntVector(), transposed, meta[7].toIntVector(), groups,
          {mask[0], mask[1], mask[2]});
      meta.clear();
      meta.emplace_back(std::move(gi));
      meta.emplace_back(std::move(gw));
      meta.emplace_back(std::move(gb));
    } else {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    }
  }
}

std::optional<std::vector<at::Tensor>> meta_results(
    const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::string* why,
    std::vector<std::pair<size_t, c10::IValue>>* constants) {
  const size_t num_args = op.schema().arguments().size();
  torch::jit::Stack meta(stack.end() - num_args, stack.end());
  map_tensor_arguments(&meta, 0, meta.size(), [](const at::Tensor& t) { return to_meta(t); });
  try {
    call_meta(op, meta);
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
  std::vector<at::Tensor> out;
  for (const auto& v : meta) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      *why = "returns a list";  // (foreach results: not recorded yet)
      return std::nullopt;
    } else if (v.isNone()) {
      out.emplace_back();  // an optional tensor the op does not return
    } else if (constants != nullptr && (v.isInt() || v.isSymInt())) {
      out.emplace_back();
      constants->emplace_back(out.size() - 1, v);
    } else {
      *why = "returns a non-tensor";
      return std::nullopt;
    }
  }
  return out;
}

namespace {

[[noreturn]] void reading_values(const std::string& what) {
  TORCH_CHECK(false, what, " needs the values of a TPU tensor, and this is a dry run: tensors "
              "have shapes, dtypes and strides but no values (torchtpu.dry_run() or "
              "TORCHTPU_DRY_RUN=1). Estimate with torchtpu.metrics.estimate() instead, or run "
              "without the dry run to compute values.");
}

// A TPU tensor for a meta result: new dry memory with its geometry.
at::Tensor dry_result(const at::Tensor& meta, c10::Device device) {
  if (!meta.defined()) return meta;
  const c10::DeviceGuard guard(device);
  return at::empty_strided(meta.sizes(), meta.strides(), meta.options().device(device));
}

// An argument the op writes takes the geometry its meta kernel gave it (an out= tensor sized by
// the op).
void follow_meta(const at::Tensor& arg, const at::Tensor& meta) {
  if (!arg.defined() || !meta.defined() || !arg.device().is_privateuseone()) return;
  if (arg.sizes() == meta.sizes() && arg.strides() == meta.strides()) return;
  const c10::DeviceGuard guard(arg.device());
  at::native::resize_(arg, meta.sizes(), std::nullopt);
  if (arg.strides() != meta.strides()) {
    arg.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes(), meta.strides(),
                                                     arg.storage_offset());
  }
}

// The name the op's kernel charges under: matmul-unit ops and fill_ by their op name without
// the overload, convolutions as "aten::convolution" and "aten::convolution_backward".
std::string charge_name(const std::string& name, const OpTraits& traits) {
  if (name == "aten::convolution_overrideable") return "aten::convolution";
  if (name == "aten::convolution_backward_overrideable") return "aten::convolution_backward";
  if (traits.unit == OpUnit::mxu || name.rfind("aten::fill_.", 0) == 0 ||
      name.rfind("aten::arange.", 0) == 0) {
    return name.substr(0, name.find('.'));
  }
  return name;
}

bool dry_copy(torch::jit::Stack* stack) {
  // _copy_from(self, dst, non_blocking)
  const at::Tensor self = (*stack)[stack->size() - 3].toTensor();
  const at::Tensor dst = (*stack)[stack->size() - 2].toTensor();
  const bool src_tpu = self.device().is_privateuseone();
  const bool dst_tpu = dst.device().is_privateuseone();
  if (!dst_tpu) reading_values("Copying to the host (.cpu(), .numpy(), printing)");
  const int64_t bytes = dst.numel() * dst.element_size();
  if (!src_tpu) {
    runtime::metrics::count("transfer.host_to_device_bytes", bytes);  // (no values are kept)
  } else if (self.device() == dst.device()) {
    runtime::metrics::count("transfer.device_to_device_bytes", bytes);
    if (dst.numel() > 0) charge_device_copy(dst, self);
  } else {
    runtime::metrics::count("transfer.device_to_device_bytes", bytes);
  }
  torch::jit::drop(*stack, 3);
  stack->push_back(dst);
  return true;
}

}  // namespace

namespace {

// The op's meta kernel on meta copies of the arguments: the results' metadata, or an error that
// says the op cannot run without values.
torch::jit::Stack run_meta(const c10::OperatorHandle& op, const std::string& name,
                           c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack meta(args.begin(), args.end());
  map_tensor_arguments(&meta, 0, meta.size(), [](const at::Tensor& t) { return to_meta(t); });
  auto cannot_run = [&](const char* why) {
    TORCH_CHECK(false, "The operator '", name, "' cannot run in a dry run: its results cannot ",
                "be known without values (its meta kernel: ", why, "). Run it outside ",
                "torchtpu.dry_run(), or on tensors with values.");
  };
  // Quantized and sparse tensors (docs/quantized.md) carry a quantizer or components that meta
  // results do not have: a dry run does not model them.
  auto layout_kind = [](const at::Tensor& t) {
    return t.defined() && (c10::isQIntType(t.scalar_type()) || t.layout() != c10::kStrided);
  };
  bool quantized_or_sparse = name.rfind("aten::quantize_per", 0) == 0 ||
                             name.rfind("aten::_make_per", 0) == 0 ||
                             name.rfind("quantized::", 0) == 0;
  for (const c10::IValue& a : args) {
    if (a.isTensor()) quantized_or_sparse |= layout_kind(a.toTensor());
  }
  if (quantized_or_sparse) cannot_run("a dry run does not model quantized or sparse tensors");
  try {
    call_meta(op, meta);
  } catch (const c10::Error& e) {
    cannot_run(e.what_without_backtrace());
  } catch (const std::exception& e) {
    cannot_run(e.what());
  }
  for (const c10::IValue& m : meta) {
    if (m.isTensor() && layout_kind(m.toTensor())) {
      cannot_run("a dry run does not model quantized or sparse tensors");
    }
  }
  return meta;
}

// Charged as its kernel charges it.
void charge_dry_op(const std::string& name, const OpTraits& traits, Capture capture,
                   c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& charged,
                   const std::vector<at::Tensor>& returned) {
  if (capture == Capture::fallback) {
    sim::record(name, estimate_fallback_op(charged));
  } else if (auto e = estimate_mxu_op(name, args, returned)) {
    sim::record(charge_name(name, traits), *e);
  } else if (auto r = estimate_random_op(name, args, returned)) {
    sim::record(name.substr(0, name.find('.')), *r);
  } else if (traits.random) {
    static const std::string random = "aten::random";
    charge_vpu_op(random, op_traits(random), charged);
  } else {
    // (A foreach op: one launch over its lists, as strict eager runs it.)
    charge_vpu_op(charge_name(name, traits), traits, charged,
                  capture == Capture::foreach ? foreach_elements(args) : 0);
  }
}

}  // namespace

bool dry_run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
                const OpTraits& traits, const std::string& name) {
  switch (capture) {
    case Capture::view:
    case Capture::factory:
      return false;  // (no device memory touched; a factory gets a dry block)
    case Capture::host_read:
      reading_values(name);
    case Capture::copy:
      return dry_copy(stack);
    default:
      break;
  }
  if (name == "aten::resize_") return false;  // (metadata and a dry block)
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const auto args = torch::jit::last(*stack, num_args);
  const auto device = common_device(name, args, schema);
  if (!device) return false;  // no TPU tensor: nothing of the dry run's
  if (capture == Capture::fallback) note_fallback(name);

  torch::jit::Stack meta = run_meta(op, name, args);
  TORCH_CHECK(meta.size() == schema.returns().size(), "dry run: '", name, "' returned ",
              meta.size(), " values for ", schema.returns().size(), " returns");
  const std::vector<int> written = returned_arguments(schema);
  torch::jit::Stack results;
  std::vector<at::Tensor> charged;  // the arguments and the new results
  for (const c10::IValue& a : args) {
    if (a.isTensor()) charged.push_back(a.toTensor());
    if (a.isTensorList()) {
      for (const at::Tensor& t : a.toTensorList()) charged.push_back(t);
    }
  }
  std::vector<at::Tensor> new_results;
  for (size_t i = 0; i < meta.size(); ++i) {
    c10::IValue& m = meta[i];
    if (written[i] >= 0) {
      const c10::IValue& arg = args[written[i]];
      if (arg.isTensor() && m.isTensor()) follow_meta(arg.toTensor(), m.toTensor());
      if (arg.isTensorList() && m.isTensorList()) {
        const auto from = arg.toTensorList();
        const auto to = m.toTensorList();
        for (size_t j = 0; j < from.size() && j < to.size(); ++j) follow_meta(from[j], to[j]);
      }
      results.push_back(arg);
    } else if (m.isTensor()) {
      at::Tensor r = dry_result(m.toTensor(), *device);
      new_results.push_back(r);
      results.push_back(r);
    } else if (m.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : m.toTensorList()) {
        list.push_back(dry_result(t, *device));
        new_results.push_back(list.get(list.size() - 1));
      }
      results.push_back(list);
    } else {
      results.push_back(m);
    }
  }
  charged.insert(charged.end(), new_results.begin(), new_results.end());
  std::vector<at::Tensor> returned;
  for (const c10::IValue& r : results) {
    if (r.isTensor()) returned.push_back(r.toTensor());
  }
  charge_dry_op(name, traits, capture, args, charged, returned);
  TORCHTPU_COUNT("dry_run.ops");
  torch::jit::drop(*stack, num_args);
  for (auto& r : results) stack->push_back(std::move(r));
  return true;
}

void check_has_values(const at::Tensor& t, const char* what) {
  if (!t.defined() || !t.device().is_privateuseone() || !t.storage()) return;
  if (runtime::dry_run() || runtime::is_dry_memory(t.storage().data())) {
    reading_values(std::string(what) + (runtime::dry_run()
                                            ? std::string()
                                            : " (of a tensor made in a dry run)"));
  }
}

}  // namespace torchtpu::aten
