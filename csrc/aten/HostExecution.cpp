// The VPU executor: element-wise, reduction, normalization, indexing, data-movement, loss and
// optimizer ops run PyTorch's own CPU kernels (vectorized with at::vec, parallel with
// at::parallel_for) directly on device memory, and each launch is charged to the cost model.
//
// How an op runs (HostKernel below):
//  1. the op's tensors are checked to be on one device (CUDA's rule) and each TPU tensor is
//     replaced on the stack by a host alias: a CPU tensor over the same bytes, whose storage
//     is resizable (a CPU kernel that resizes an out= argument gets fresh memory);
//  2. random ops get the device generator lent as a CPU generator (GeneratorLoan);
//  3. the CPU kernel runs, in place on device memory; for ops that return new tensors, host
//     allocations are routed to the device's HBM while it runs (HostAllocationsOnDevice);
//  4. results become TPU tensors again: a result that is an argument (in-place, out=) maps back
//     to that argument, whose shape is synced if the kernel resized it; a new result takes its
//     device-resident memory over without a copy (anything else is copied and counted as
//     vpu.result_copies).
// In strict eager, ops whose results are their arguments (in-place ops, and out= ops whose
// outputs are already sized) and that draw no random numbers are launched instead: run at once
// on host aliases of the arguments where the stream is idle and this thread runs such work itself
// (launch_here_if_idle), else enqueued with their TPU tensors and geometry of issue time, the
// worker making the host aliases. Everything else runs inline, after the device's queued work.
// Functional and in-place variants of structured ops are not registered here: PyTorch's
// CompositeExplicitAutogradNonFunctional kernels of those allocate the result on the device
// and call the out= variant, which runs here with no allocation routed at all (so a kernel's
// internal temporaries, such as a widened copy of the input, stay in host memory).
// float64 and complex have no TPU hardware support: the VPU ops on them are treated as an
// emulation (as XLA emulates float64 on TPUs), counted per op as "emulated.<op>" and charged
// the cost model's emulation factor times the VPU cost. (Matmuls on them are fallbacks: see Matmul.cpp.)
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "aten/OpTraits.h"
#include "aten/Unsigned.h"
#include "runtime/Allocator.h"
#include "runtime/Mode.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <mutex>
#include <string_view>

namespace torchtpu::aten {
namespace {

// A host alias whose storage is resizable (a CPU kernel that resizes an out= argument gets fresh
// memory and leaves the device memory alone).
at::Tensor resizable_host_alias(const at::Tensor& t) {
  return with_view_bits(host_alias_over(t.storage(), t.sizes(), t.strides(), t.storage_offset(),
                                        t.dtype(), /*resizable=*/true),
                        t.is_conj(), t.is_neg());
}

// A TPU tensor as an op issued in strict eager sees it: its storage and geometry then. The
// stream's worker makes the host alias (host_alias_over) when the op runs.
struct IssuedTensor {
  c10::Storage storage;
  c10::DimVector sizes, strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
  bool conj = false, neg = false;

  static IssuedTensor of(const at::Tensor& t) {
    return {t.storage(), c10::DimVector(t.sizes()), c10::DimVector(t.strides()),
            t.storage_offset(), t.dtype(), t.is_conj(), t.is_neg()};
  }
  at::Tensor host_alias() const {
    return with_view_bits(host_alias_over(storage, sizes, strides, offset, dtype,
                                          /*resizable=*/true),
                          conj, neg);
  }
};

// A TPU tensor for a new host result: it takes the result's memory over when that is a device
// block owned by this result alone, and copies it otherwise.
at::Tensor to_device_result(const at::Tensor& host, c10::Device device) {
  if (!host.defined()) return host;
  c10::StorageImpl* storage = host.storage().unsafeGetStorageImpl();
  if (c10::raw::intrusive_ptr::use_count(storage) == 1) {
    c10::DataPtr taken = runtime::take_device_block(storage->mutable_data_ptr());
    if (taken || storage->nbytes() == 0) {
      if (!taken) taken = c10::DataPtr(nullptr, device);
      c10::Storage adopted(c10::Storage::use_byte_size_t(), storage->nbytes(), std::move(taken),
                           &runtime::allocator(), /*resizable=*/true);
      auto out = at::detail::make_tensor<c10::TensorImpl>(
          std::move(adopted), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), host.dtype());
      out.unsafeGetTensorImpl()->set_sizes_and_strides(host.sizes(), host.strides(),
                                                       host.storage_offset());
      return out;
    }
  }
  runtime::metrics::count("vpu.result_copies");
  return on_device(host, device);
}

// After the kernel: make a TPU argument reflect what the kernel did to its host alias.
void sync_argument(const at::Tensor& dev, const at::Tensor& alias) {
  const bool moved = alias.storage().data() != dev.storage().data();
  if (moved) {
    // The kernel resized the argument beyond its storage: the argument takes the new memory.
    const_cast<at::Tensor&>(dev).set_(to_device_result(alias, dev.device()));
    return;
  }
  if (alias.sizes() != dev.sizes() || alias.strides() != dev.strides() ||
      alias.storage_offset() != dev.storage_offset()) {
    const_cast<at::Tensor&>(dev).set_(dev.storage(), alias.storage_offset(), alias.sizes(),
                                      alias.strides());
  }
}

struct Swapped {
  at::Tensor device;
  at::Tensor alias;
};

bool is_foreign_dtype(const at::Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kDouble || at::isComplexType(s);
}


// What the cost model needs to know of an op's tensors.
struct Footprint {
  double bytes = 0;
  int64_t elements = 0;
  bool foreign = false;
  void add(const at::Tensor& t) {
    bytes += sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size()));
    elements = std::max<int64_t>(elements, t.numel());
    foreign = foreign || is_foreign_dtype(t);
  }
};

void charge(const std::string& name, const OpTraits& traits, const Footprint& f) {
  if (f.foreign) runtime::metrics::count("emulated." + name);
  sim::record(name, sim::cost_model().vector(f.elements, traits.vpu_units, f.bytes, f.foreign));
}

bool has_generator_argument(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments()) {
    auto type = a.type();
    if (type->kind() == c10::TypeKind::OptionalType) {
      type = type->castRaw<c10::OptionalType>()->getElementType();
    }
    if (type->kind() == c10::TypeKind::GeneratorType) return true;
  }
  return false;
}


// An out= op is enqueued only when its out tensors are non-empty tensors: PyTorch's generic
// kernels for the functional and in-place forms hand over outputs already sized by the op's
// meta function. An empty out tensor (to be sized by the kernel) makes the op run inline.
// (Running the meta function here instead would cost little for C++ meta kernels but
// milliseconds for the Python ones some ops have.)
bool outputs_already_sized(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                           size_t base) {
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (!schema.arguments()[i].is_out()) continue;
    const c10::IValue& v = stack[base + i];
    if (!v.isTensor() || v.toTensor().numel() == 0) return false;
  }
  return true;
}

// Runs the op's CPU kernel on `stack` (its arguments stack[base, base + num_args), TPU tensors
// replaced by host aliases). Calls on uint16/32/64 go through the unsigned policy
// (aten/Unsigned.h: in int64 where the CPU kernel lacks the type).
void redispatch_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base,
                       size_t num_args) {
  if (has_unsigned_operand(op, *stack, base, num_args)) {
    run_unsigned_on_host(op, stack, op_name(op));
    return;
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// Runs the op's CPU kernel on host aliases of the TPU arguments on `stack`; maps results back.
// `generator`: the op takes a generator argument (lent the device's: GeneratorLoan).
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device,
                 bool route_results, bool generator, Footprint* footprint) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t base = stack->size() - num_args;
  std::vector<Swapped> swapped;
  map_tensor_arguments(stack, base, num_args, [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.device().is_privateuseone()) return t;
    // A tensor passed twice is one alias (the CPU kernel sees an in-place call as in-place).
    for (const auto& s : swapped) {
      if (s.device.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return s.alias;
    }
    at::Tensor alias = resizable_host_alias(t);
    swapped.push_back({t, alias});
    return alias;
  });
  {
    std::optional<GeneratorLoan> loan;
    if (generator) loan.emplace(op, stack, device);
    const c10::DeviceGuard guard(device);
    std::optional<runtime::HostAllocationsOnDevice> routed;
    if (route_results) routed.emplace(device.index());
    redispatch_to_cpu(op, stack, base, num_args);
  }
  // Arguments the kernel wrote (in place, out=) reflect what it did; the check is cheap, so
  // every argument is looked at (some kernels write arguments their schema does not mark).
  for (const auto& s : swapped) sync_argument(s.device, s.alias);
  // Results: arguments map back to themselves, new tensors move to the device.
  auto map_result = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.is_cpu()) return t;
    for (const auto& s : swapped) {
      if (t.unsafeGetTensorImpl() == s.alias.unsafeGetTensorImpl()) return s.device;
    }
    if (footprint != nullptr) footprint->add(t);
    return to_device_result(t, device);
  };
  const size_t num_returns = schema.returns().size();
  map_tensor_arguments(stack, stack->size() - num_returns, num_returns, map_result);
}

// Calls `f` on every defined tensor of stack[from, end) held as a tensor or in a tensor list
// (the tensors an op is charged for, as a dry run charges them: aten/DryRun.cpp).
template <typename F>
void for_each_charged_tensor(const torch::jit::Stack& stack, size_t from, F&& f) {
  for (size_t i = from; i < stack.size(); ++i) {
    if (stack[i].isTensor()) {
      if (stack[i].toTensor().defined()) f(stack[i].toTensor());
    } else if (stack[i].isTensorList()) {
      for (const at::Tensor& t : stack[i].toTensorList()) {
        if (t.defined()) f(t);
      }
    }
  }
}

std::vector<at::Tensor> tensors_of(const torch::jit::Stack& stack, size_t from) {
  std::vector<at::Tensor> out;
  for_each_charged_tensor(stack, from, [&](const at::Tensor& t) { out.push_back(t); });
  return out;
}

// For ops whose CPU kernels for bfloat16 / float16 are not trustworthy (OpTraits
// computes_in_float32): bfloat16 / float16 tensor arguments on `stack` become float32 copies on the
// device; returns the reduced type to round the results to (kFloat when nothing was widened).
c10::ScalarType widen_reduced_precision(const std::string& name, const OpTraits& traits,
                                        torch::jit::Stack* stack, size_t base, size_t num_args) {
  c10::ScalarType reduced = c10::kFloat;
  if (!traits.computes_in_float32) return reduced;
  map_tensor_arguments(stack, base, num_args, [&](const at::Tensor& t) {
    if (!t.defined() || !at::isReducedFloatingType(t.scalar_type())) return t;
    reduced = t.scalar_type();
    return t.to(c10::kFloat);
  });
  if (reduced != c10::kFloat) runtime::metrics::count("vpu.widened_to_float32." + name.substr(6));
  return reduced;
}

// What host_kernel needs to know of an op beyond its arguments, found at its first call (the
// schema does not change): looked up per call, these cost a string and three vectors.
struct HostOp {
  std::string name;
  const OpTraits* traits = nullptr;
  std::vector<int> returned;  // per return: the argument it aliases (in-place, out=), or -1
  std::vector<size_t> outs;   // the out= arguments
  bool generator = false;     // a generator argument (lent the device's)
  bool enqueueable = false;   // results are arguments and no generator is lent
  bool foreach = false;       // a foreach op: one launch over lists of tensors
};

HostOp host_op_of(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  HostOp facts;
  facts.name = op_name(op);
  facts.traits = &op_traits(facts.name);
  facts.returned = returned_arguments(schema);
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out()) facts.outs.push_back(i);
  }
  facts.foreach = facts.name.rfind("aten::_foreach_", 0) == 0;
  facts.generator = has_generator_argument(schema);
  facts.enqueueable = !facts.generator &&
                      std::all_of(facts.returned.begin(), facts.returned.end(),
                                  [](int i) { return i >= 0; });
  return facts;
}

// Runs an enqueued op's CPU kernel on `host` (its arguments, TPU tensors replaced by host
// aliases). Its out= tensors keep the shapes they were issued with (an error otherwise) and
// their geometry (values laid out anew by the kernel are moved back).
void run_with_outs_kept(const c10::OperatorHandle& op, const HostOp& f, torch::jit::Stack* host) {
  // The out aliases, to check that the kernel kept their shapes.
  c10::SmallVector<at::Tensor, 1> outs;
  for (size_t i : f.outs) {
    if ((*host)[i].isTensor()) outs.push_back((*host)[i].toTensor());
  }
  c10::SmallVector<c10::DimVector, 1> sizes, strides;
  c10::SmallVector<int64_t, 1> offsets;
  for (const at::Tensor& o : outs) {
    sizes.emplace_back(o.sizes());
    strides.emplace_back(o.strides());
    offsets.push_back(o.storage_offset());
  }
  redispatch_to_cpu(op, host, 0, host->size());
  for (size_t j = 0; j < outs.size(); ++j) {
    TORCH_CHECK(outs[j].sizes() == c10::IntArrayRef(sizes[j]), f.name,
                ": the out= tensor of shape ", c10::IntArrayRef(sizes[j]),
                " does not have the result's shape ", outs[j].sizes(),
                ". PyTorch's resizing of non-empty out= tensors is deprecated and "
                "strict eager does not do it: pass an empty or correctly sized out "
                "tensor (or use debug eager).");
    if (outs[j].strides() != c10::IntArrayRef(strides[j]) ||
        outs[j].storage_offset() != offsets[j]) {
      // The CPU kernel laid its out= alias out anew (structured kernels restride an out tensor
      // to their own memory format: replication_pad3d of a channels-last input writes
      // channels-last) and wrote the values so; the TPU tensor keeps the geometry it was
      // issued with: the values are moved into it.
      const at::Tensor written = outs[j].clone();
      outs[j].as_strided(sizes[j], strides[j], offsets[j]).copy_(written);
      runtime::metrics::count("vpu.out_relaid");
    }
  }
}

// route_results: the op returns new tensors, so its host allocations go to device memory.
// Inputs (not out= tensors) become contiguous copies, on every path (the functional op runs
// inline, its out= overload is enqueued).
void contiguous_inputs(const HostOp& f, torch::jit::Stack* stack, size_t base, size_t num_args) {
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (!v.isTensor() || std::find(f.outs.begin(), f.outs.end(), i) != f.outs.end()) continue;
    const at::Tensor& t = v.toTensor();
    if (t.defined() && !t.is_contiguous()) v = t.contiguous();
  }
}

// Called with out= tensors made in C++ (PyTorch's structured functional or in-place wrapper,
// which ran the op's meta function and made its warnings at the call), the CPU kernel's
// structured wrapper would run that meta function and warn again: its warnings are dropped. (Or
// the call's scratch check made the CPU kernel's warnings: CallChecks.)
bool warnings_made_at_call(const HostOp& f, const torch::jit::Stack& stack, size_t base) {
  bool warned = !f.outs.empty();
  for (size_t i : f.outs) {
    const c10::IValue& v = stack[base + i];
    if (v.isTensor() && v.toTensor().defined() && from_python(v.toTensor())) warned = false;
  }
  return warned || call_warned();
}

// An op whose results are its arguments, charged and run on the device's stream: at once on the
// issuing thread where the stream is idle, else queued for the stream's worker.
void enqueue_on_stream(const c10::OperatorHandle& op, const HostOp& f, torch::jit::Stack* stack,
                       size_t base, size_t num_args, c10::Device device, bool warned_at_call,
                       int64_t list_elements) {
  const std::string& name = f.name;
  Footprint footprint;
  int64_t largest = 0;  // elements of the largest operand (the loops run in parallel above
                        // kParallelElements)
  for_each_tensor_argument(*stack, base, num_args, [&](const at::Tensor& t) {
    if (!t.defined() || t.device().is_cpu()) return;
    footprint.add(t);
    largest = std::max<int64_t>(largest, t.numel());
  });
  if (f.foreach) footprint.elements = list_elements;
  charge(name, *f.traits, footprint);
  const bool parallel = largest >= kParallelElements;
  // The results are arguments: the stack keeps them, in return order.
  auto return_arguments = [&] {
    c10::SmallVector<c10::IValue, 2> results;
    for (int i : f.returned) results.push_back(std::move((*stack)[base + i]));
    torch::jit::drop(*stack, num_args);
    for (auto& r : results) stack->push_back(std::move(r));
  };
  // Run at once where the stream is idle: the kernel on host aliases of the arguments.
  if (launch_here_if_idle(device, name,
                          [&] {
                            torch::jit::Stack host(stack->begin() + base, stack->end());
                            c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 4>
                                aliases;  // (a tensor passed twice is one alias)
                            map_tensor_arguments(
                                &host, 0, num_args, [&](const at::Tensor& t) -> at::Tensor {
                                  if (!t.defined() || t.device().is_cpu()) return t;
                                  for (const auto& [impl, alias] : aliases) {
                                    if (impl == t.unsafeGetTensorImpl()) return alias;
                                  }
                                  aliases.emplace_back(t.unsafeGetTensorImpl(),
                                                       resizable_host_alias(t));
                                  return aliases.back().second;
                                });
                            std::optional<QuietWarnings> quiet;
                            if (warned_at_call) quiet.emplace();
                            run_with_outs_kept(op, f, &host);
                          },
                          parallel)) {
    return_arguments();
    return;
  }
  // The work keeps the TPU tensors (their storages own the memory) and their geometry of
  // issue time (as a kernel launch captures its arguments); the stream's worker makes the
  // host aliases from those, so the issuing thread allocates none.
  c10::SmallVector<IssuedTensor, 4> issued;
  // For each issued tensor, the earlier one it is (-1: none): a tensor passed twice is one
  // alias when the op runs, so the CPU kernel sees an in-place call as in-place.
  c10::SmallVector<int, 4> same_as;
  c10::SmallVector<const c10::TensorImpl*, 4> impls;
  torch::jit::Stack args(stack->begin() + base, stack->end());
  map_tensor_arguments(&args, 0, num_args, [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (t.device().is_cpu()) return t.clone();  // a CPU scalar: its value now
    const auto first = std::find(impls.begin(), impls.end(), t.unsafeGetTensorImpl());
    same_as.push_back(first == impls.end() ? -1 : static_cast<int>(first - impls.begin()));
    impls.push_back(t.unsafeGetTensorImpl());
    issued.push_back(IssuedTensor::of(t));
    return t;
  });
  std::vector<at::Tensor> written;  // (checked for NaN/Inf with TORCHTPU_CHECK_NANS)
  if (runtime::check_nans()) {
    for (int i : f.returned) {
      if ((*stack)[base + i].isTensor()) written.push_back((*stack)[base + i].toTensor());
    }
  }
  return_arguments();
  launch(device, name,
         [op, &f, args = std::move(args), issued = std::move(issued),
          same_as = std::move(same_as), warned_at_call,
          deterministic = DeterministicAlgorithms::Setting::now()]() mutable {
           const DeterministicAlgorithms scope(deterministic);
           // (`issued` keeps the TPU tensors' storages; `args` the tensors, released with
           // this work by a host thread, not here.)
           torch::jit::Stack host = args;
           c10::SmallVector<at::Tensor, 4> aliases;
           map_tensor_arguments(&host, 0, host.size(), [&](const at::Tensor& t) -> at::Tensor {
             if (!t.defined() || t.device().is_cpu()) return t;
             const size_t k = aliases.size();
             aliases.push_back(same_as[k] >= 0 ? aliases[same_as[k]] : issued[k].host_alias());
             return aliases.back();
           });
           std::optional<QuietWarnings> quiet;
           if (warned_at_call) quiet.emplace();
           run_with_outs_kept(op, f, &host);
         },
         std::move(written), parallel);
}

// Everything else: after the queued work, on the calling thread.
void run_inline(const c10::OperatorHandle& op, const HostOp& f, torch::jit::Stack* stack,
                size_t base, size_t num_args, c10::Device device, bool route_results,
                bool warned_at_call, int64_t list_elements) {
  const std::string& name = f.name;
  const auto& schema = op.schema();
  const c10::ScalarType reduced =
      route_results ? widen_reduced_precision(name, *f.traits, stack, base, num_args)
                    : c10::kFloat;
  wait_for_device(device);
  Footprint footprint;
  for_each_charged_tensor(*stack, base, [&](const at::Tensor& t) {
    if (t.device().is_privateuseone()) footprint.add(t);
  });
  {
    const runtime::metrics::HostTime timed(name, /*lasting=*/true);
    std::optional<QuietWarnings> quiet;
    if (warned_at_call) quiet.emplace();
    run_on_host(op, stack, device, route_results, f.generator, &footprint);
  }
  if (f.foreach) footprint.elements = list_elements;
  charge(name, *f.traits, footprint);
  if (reduced != c10::kFloat) {
    const size_t num_returns = schema.returns().size();
    map_tensor_arguments(stack, stack->size() - num_returns, num_returns,
                         [&](const at::Tensor& t) {
                           return t.defined() && t.scalar_type() == c10::kFloat ? t.to(reduced) : t;
                         });
  }
  // (Run on the calling thread in every mode: checked here with TORCHTPU_CHECK_NANS.)
  if (runtime::check_nans()) {
    check_results(name, tensors_of(*stack, stack->size() - schema.returns().size()));
  }
}

template <bool route_results>
class HostKernel final : public c10::OperatorKernel {
 public:
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack);

 private:
  const HostOp& facts(const c10::OperatorHandle& op) {
    std::call_once(found_, [&] { facts_ = host_op_of(op); });
    return facts_;
  }
  std::once_flag found_;
  HostOp facts_;
};

template <bool route_results>
void HostKernel<route_results>::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                                           torch::jit::Stack* stack) {
  const HostOp& f = facts(op);
  const std::string& name = f.name;
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t base = stack->size() - num_args;
  const auto device = common_device(name, torch::jit::last(*stack, num_args), schema);
  TORCH_INTERNAL_ASSERT(device.has_value(), "host kernel for ", name, " without a TPU tensor");

  if (f.traits->contiguous_operands) contiguous_inputs(f, stack, base, num_args);

  const bool warned_at_call = warnings_made_at_call(f, *stack, base);

  // A foreach op is charged over its lists (foreach_elements), counted before they are replaced.
  const int64_t list_elements =
      f.foreach ? foreach_elements(torch::jit::last(*stack, num_args)) : 0;

  // Asynchronous (strict mode): ops whose results are their arguments, once those are sized,
  // with no generator to lend. Everything else runs inline after the queued work, and so do ops
  // whose result shapes depend on the values (nonzero's out= tensor: the CPU resizes it to the
  // count it finds, whatever its size).
  const bool enqueue = !route_results && f.enqueueable && runtime::asynchronous() &&
                       f.traits->sizing != Sizing::value_dependent &&
                       (f.outs.empty() || outputs_already_sized(schema, *stack, base)) &&
                       (!has_unsigned_operand(op, *stack, base, num_args) ||
                        unsigned_runs_natively(op, *stack, base, num_args));
  if (enqueue) {
    enqueue_on_stream(op, f, stack, base, num_args, *device, warned_at_call, list_elements);
    return;
  }
  run_inline(op, f, stack, base, num_args, *device, route_results, warned_at_call, list_elements);
}

bool has_own_kernel(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

// Functional / in-place variants of structured ops: PyTorch's generic kernel allocates the
// result on the device and calls the out= variant.
bool routed_to_out_variant(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
}

// A foreach op (_foreach_mul_, ...) whose CPU kernel is PyTorch's per-tensor decomposition (its
// CompositeExplicitAutograd kernel, device-generic: each per-tensor op dispatches on its own).
// _foreach_copy(_) stays decomposed: its per-tensor copy_ may be a transfer between devices.
bool decomposable_foreach(const c10::OperatorHandle& op, const std::string& name) {
  return name.rfind("aten::_foreach_", 0) == 0 && name.rfind("aten::_foreach_copy", 0) != 0 &&
         !op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
}

// In-place ops whose one kernel, CompositeExplicitAutograd, calls an at::native out= function
// directly rather than through the dispatcher, which runs the op's DispatchStub on the tensors'
// device: on tpu, "DispatchStub: missing kernel for tpu". Run here, that composite is the CPU
// entry of the op's dispatch table and runs on host aliases, as on the CPU.
// conj_physical_: at::native::conj_physical_out(self, self).
bool composite_calls_cpu_stub(const c10::OperatorName& op_name) {
  return op_name.name == "aten::conj_physical_" && op_name.overload_name.empty();
}

bool returns_new_tensors(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() == nullptr) return true;
  }
  return false;
}

}  // namespace

std::vector<int> returned_arguments(const c10::FunctionSchema& schema) {
  std::vector<int> out;
  for (const auto& ret : schema.returns()) {
    int found = -1;
    if (ret.alias_info() != nullptr && ret.alias_info()->isWrite()) {
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const auto* info = schema.arguments()[i].alias_info();
        if (info != nullptr && info->isWrite() &&
            info->beforeSets() == ret.alias_info()->beforeSets()) {
          found = static_cast<int>(i);
        }
      }
    }
    out.push_back(found);
  }
  return out;
}

void run_per_tensor(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // (Registered as Capture::foreach only where the CPU entry of the op's dispatch table is that
  // composite: decomposable_foreach.)
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

void charge_vpu_op(const std::string& name, const OpTraits& traits,
                   const std::vector<at::Tensor>& tensors, int64_t elements) {
  Footprint footprint;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.device().is_privateuseone()) footprint.add(t);
  }
  if (elements > 0) footprint.elements = elements;
  charge(name, traits, footprint);
}

int64_t foreach_elements(c10::ArrayRef<c10::IValue> args) {
  int64_t most = 0;
  for (const c10::IValue& slot : args) {
    if (!slot.isTensorList()) continue;
    int64_t sum = 0;
    for (const at::Tensor& t : slot.toTensorList()) {
      if (t.defined() && t.device().is_privateuseone()) sum += t.numel();
    }
    most = std::max(most, sum);
  }
  return most;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The ops OpTraits places on the VPU, every overload with a CPU kernel.
  for (const auto& op_name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (op_name.name.rfind("aten::", 0) != 0) continue;
    const OpTraits& traits = op_traits(op_name.name);
    if (traits.unit != OpUnit::vpu) continue;
    auto handle = c10::Dispatcher::singleton().findOp(op_name);
    if (!handle) continue;
    const bool foreach = decomposable_foreach(*handle, op_name.name);
    if (!foreach && !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        !composite_calls_cpu_stub(op_name)) {
      continue;
    }
    if (has_own_kernel(*handle)) continue;  // a dedicated torchtpu kernel wins
    if (routed_to_out_variant(*handle)) continue;
    const std::string full = op_name.overload_name.empty()
                                 ? op_name.name
                                 : op_name.name + "." + op_name.overload_name;
    const bool new_results = returns_new_tensors(handle->schema());
    const bool random = has_generator_argument(handle->schema());
    // (Ops sized by their input values are not recorded: DeferAndFuse materializes the pending
    // work they depend on and runs them. A foreach op is recorded as its per-tensor ops.)
    const Capture capture = foreach ? Capture::foreach
                            : random ? Capture::random
                            : traits.sizing == Sizing::value_dependent ? Capture::none
                            : new_results ? Capture::new_results
                                          : Capture::results_are_arguments;
    if (new_results) {
      m.impl(full.c_str(), entry_functor(std::make_unique<HostKernel<true>>(), capture));
    } else {
      m.impl(full.c_str(), entry_functor(std::make_unique<HostKernel<false>>(), capture));
    }
  }
}

}  // namespace torchtpu::aten
