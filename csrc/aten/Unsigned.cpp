// uint16, uint32 and uint64 on the host executor: aten/Unsigned.h, docs/simulated-chip.md
// ("Unsigned integers").
//
// A TPU computes 32-bit unsigned integers (XLA's u32: wrap-around arithmetic modulo 2^32);
// PyTorch's CPU kernels have few ops on its unsigned types beyond uint8 (copies, mul, bitwise
// and/or/xor, eq/ne, where, sum, cumsum, sort, indexing). A call the CPU kernel refuses with
// "... not implemented for 'UInt32'" runs again in int64:
//  - unsigned tensor operands become int64 copies (zero-extended: uint16 and uint32 values are
//    exact in int64; uint64 values are taken bit for bit), and a dtype= argument of an unsigned
//    type becomes int64;
//  - the CPU kernel runs on those;
//  - results written into arguments (in-place, out=) are copied back into them, and new results
//    are converted to the types the op's meta kernel gives (PyTorch's dtype rules): int64 to an
//    unsigned type keeps the low bits, so add, sub, mul, pow, neg, sums, products, shifts left
//    and arange wrap modulo 2^n exactly as the chip's integer units do; comparisons, min/max,
//    division, remainder, shifts right and bitwise ops see the zero-extended values, exact too.
// uint64 values of 2^63 or more are negative in int64: ops that order, divide or shift them
// right would be wrong, so those calls are refused (NotImplementedError naming the op and
// type); the modular ops below are exact for every uint64 value.
// Which calls need int64 is found at their first run (the CPU kernel's refusal) and kept per
// (op, argument dtypes); until a call is known to run as it is, it runs at once on the calling
// thread (aten/CallChecks.cpp), so no queued or fused work ever meets the refusal.
#include "aten/Unsigned.h"

#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/OpTraits.h"
#include "runtime/Metrics.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace torchtpu::aten {
namespace {

bool is_dtype_argument(const c10::Argument& a) {
  c10::TypePtr type = a.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

// "aten::add.out|UInt32,UInt32,UInt32": the op and its arguments' dtypes.
std::string signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t base,
                      size_t num_args) {
  const auto& schema = op.schema();
  std::string key = schema.name();
  key += '.';
  key += schema.overload_name();
  key += '|';
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& v = stack[base + i];
    if (i < schema.arguments().size() && is_dtype_argument(schema.arguments()[i]) && v.isInt()) {
      key += c10::toString(static_cast<c10::ScalarType>(v.toInt()));
    }
    key += ',';
  }
  for_each_tensor_argument(stack, base, num_args, [&](const at::Tensor& t) {
    key += t.defined() ? c10::toString(t.scalar_type()) : "-";
    key += ',';
  });
  return key;
}

struct Known {
  std::mutex mutex;
  std::unordered_map<std::string, bool> native;  // signature -> runs as it is
};
Known& known() {
  static Known* k = new Known();  // (never destroyed: ops may run at exit)
  return *k;
}

std::optional<bool> lookup(const std::string& key) {
  Known& k = known();
  const std::lock_guard<std::mutex> lock(k.mutex);
  auto it = k.native.find(key);
  if (it == k.native.end()) return std::nullopt;
  return it->second;
}

void remember(const std::string& key, bool native) {
  Known& k = known();
  const std::lock_guard<std::mutex> lock(k.mutex);
  k.native[key] = native;
}

// The CPU kernel's refusal of an unsigned type (AT_DISPATCH's message).
bool refuses_unsigned(const c10::NotImplementedError& e) {
  const std::string& m = e.msg();
  return m.find("not implemented for 'UInt16'") != std::string::npos ||
         m.find("not implemented for 'UInt32'") != std::string::npos ||
         m.find("not implemented for 'UInt64'") != std::string::npos;
}

// Ops whose int64 results are exact modulo 2^64 whatever the operands' bits: uint64 values of
// 2^63 or more (negative in int64) give their exact results in these.
bool modular(std::string_view key) {
  static const std::unordered_set<std::string_view> keys{
      "add", "sub", "rsub", "mul", "neg", "negative", "pow", "square", "bitwise_and",
      "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "__lshift_",
      "__ilshift_", "sum", "nansum", "prod", "cumsum",
      "cumprod", "eq", "ne", "where", "fill", "masked_fill", "index", "index_put", "_index_put_impl",
      "index_select", "gather", "scatter", "scatter_add", "take", "put", "flip", "roll", "cat",
      "stack", "copy", "clone", "repeat", "tril", "triu", "masked_scatter", "masked_select",
      "diag", "diagonal_copy"};
  return keys.count(key) > 0;
}

[[noreturn]] void refuse(const std::string& name, c10::ScalarType type, const std::string& why) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, name, " on ", c10::toString(type), " tensors on tpu: ",
                              why, " (docs/simulated-chip.md, \"Unsigned integers\")");
}

// The results' types by PyTorch's rules: the op's meta kernel on meta copies of the arguments.
std::vector<c10::ScalarType> meta_result_types(const c10::OperatorHandle& op,
                                               const torch::jit::Stack& stack, size_t base,
                                               size_t num_args, const std::string& name,
                                               c10::ScalarType type) {
  std::vector<c10::ScalarType> result_types;
  torch::jit::Stack meta(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  std::unordered_map<const c10::TensorImpl*, at::Tensor> copies;
  map_tensor_arguments(&meta, 0, num_args, [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.is_meta()) return t;
    auto it = copies.find(t.unsafeGetTensorImpl());
    if (it == copies.end()) {
      it = copies
               .emplace(t.unsafeGetTensorImpl(),
                        at::empty_strided(t.sizes(), t.strides(),
                                          t.options().device(c10::kMeta)))
               .first;
    }
    return it->second;
  });
  try {
    call_meta(op, meta);
  } catch (const c10::Error& e) {
    refuse(name, type,
           "PyTorch's CPU kernel lacks the type and its meta kernel, which gives the result "
           "types of the int64 run, failed: " + e.msg());
  }
  for (const c10::IValue& v : meta) {
    result_types.push_back(v.isTensor() && v.toTensor().defined() ? v.toTensor().scalar_type()
                                                                   : c10::ScalarType::Undefined);
  }
  return result_types;
}

// The written arguments get the int64 results back; new results take PyTorch's result types.
void narrow_results(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                    const std::vector<c10::IValue>& original,
                    const std::vector<c10::ScalarType>& result_types) {
  const std::vector<int> returned = returned_arguments(schema);
  const size_t num_returns = schema.returns().size();
  const size_t first = stack->size() - num_returns;
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& slot = (*stack)[first + r];
    if (!slot.isTensor() || !slot.toTensor().defined()) continue;
    const at::Tensor result = slot.toTensor();
    if (r < returned.size() && returned[r] >= 0 && original[returned[r]].isTensor()) {
      // An argument the op wrote: its int64 copy's values go back into it.
      const at::Tensor& arg = original[returned[r]].toTensor();
      if (arg.unsafeGetTensorImpl() != result.unsafeGetTensorImpl()) {
        if (arg.sizes() != result.sizes()) arg.resize_(result.sizes());
        arg.copy_(result);
      }
      slot = arg;
      continue;
    }
    const c10::ScalarType want = r < result_types.size() ? result_types[r] : c10::ScalarType::Undefined;
    if (want != c10::ScalarType::Undefined && want != result.scalar_type()) slot = result.to(want);
  }
}

void run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base,
                 size_t num_args, const std::string& name) {
  const auto& schema = op.schema();
  // The unsigned type of the call (the widest), for the messages.
  c10::ScalarType type = c10::kUInt16;
  for_each_tensor_argument(*stack, base, num_args, [&](const at::Tensor& t) {
    if (t.defined() && is_wide_unsigned(t.scalar_type()) &&
        c10::elementSize(t.scalar_type()) > c10::elementSize(type)) {
      type = t.scalar_type();
    }
  });
  const std::vector<c10::ScalarType> result_types =
      meta_result_types(op, *stack, base, num_args, name, type);
  // The arguments as they were (written ones get the int64 results back).
  const std::vector<c10::IValue> original(stack->begin() + static_cast<std::ptrdiff_t>(base),
                                          stack->end());
  const bool exact_for_any_bits = modular(op_key(schema.name()));
  // out= tensors are written, not read: an int64 tensor of their shape takes their place (but
  // where one is an input too: in-place calls through an out= variant).
  std::unordered_set<const c10::TensorImpl*> outs, inputs;
  for (size_t i = 0; i < num_args && i < schema.arguments().size(); ++i) {
    const bool out = schema.arguments()[i].is_out();
    for_each_tensor_argument(*stack, base + i, 1, [&](const at::Tensor& t) {
      (out ? outs : inputs).insert(t.unsafeGetTensorImpl());
    });
  }
  for (const c10::TensorImpl* t : inputs) outs.erase(t);
  std::unordered_map<const c10::TensorImpl*, at::Tensor> wide;
  map_tensor_arguments(stack, base, num_args, [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !is_wide_unsigned(t.scalar_type())) return t;
    auto it = wide.find(t.unsafeGetTensorImpl());
    if (it != wide.end()) return it->second;
    if (outs.count(t.unsafeGetTensorImpl()) > 0) {
      at::Tensor w = at::empty(t.sizes(), t.options().dtype(c10::kLong));
      return wide.emplace(t.unsafeGetTensorImpl(), w).first->second;
    }
    at::Tensor w = t.to(c10::kLong);
    if (t.scalar_type() == c10::kUInt64 && !exact_for_any_bits && w.numel() > 0 &&
        w.lt(0).any().item<bool>()) {
      refuse(name, c10::kUInt64,
             "values of 2**63 or more, which this op cannot compute in int64 (it orders, "
             "divides or shifts right values); uint64 add, sub, mul, pow, sums, bitwise and "
             "indexing ops take every value");
    }
    wide.emplace(t.unsafeGetTensorImpl(), w);
    return w;
  });
  for (size_t i = 0; i < num_args && i < schema.arguments().size(); ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (is_dtype_argument(schema.arguments()[i]) && v.isInt() &&
        is_wide_unsigned(static_cast<c10::ScalarType>(v.toInt()))) {
      v = static_cast<int64_t>(c10::kLong);
    }
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const c10::NotImplementedError& e) {
    refuse(name, type, "PyTorch's CPU kernel has neither this type nor int64: " + e.msg());
  }
  runtime::metrics::count("vpu.widened_to_int64." + name.substr(name.rfind(':') + 1));
  narrow_results(schema, stack, original, result_types);
}

thread_local bool t_at_once = false;

}  // namespace

bool unsigned_at_once() { return t_at_once; }
void set_unsigned_at_once(bool at_once) { t_at_once = at_once; }

bool has_unsigned_operand(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          size_t base, size_t num_args) {
  bool found = false;
  for_each_tensor_argument(stack, base, num_args, [&](const at::Tensor& t) {
    found = found || (t.defined() && is_wide_unsigned(t.scalar_type()));
  });
  if (found) return true;
  const auto& args = op.schema().arguments();
  for (size_t i = 0; i < num_args && i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    if (v.isInt() && is_dtype_argument(args[i]) &&
        is_wide_unsigned(static_cast<c10::ScalarType>(v.toInt()))) {
      return true;
    }
  }
  return false;
}

bool unsigned_runs_natively(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                            size_t base, size_t num_args) {
  return lookup(signature(op, stack, base, num_args)).value_or(false);
}

void run_unsigned_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          const std::string& name) {
  const size_t num_args = op.schema().arguments().size();
  const size_t base = stack->size() - num_args;
  const std::string key = signature(op, *stack, base, num_args);
  const std::optional<bool> native = lookup(key);
  if (native.value_or(true)) {
    const std::vector<c10::IValue> saved(stack->begin() + static_cast<std::ptrdiff_t>(base),
                                         stack->end());
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
      if (!native) remember(key, true);
      return;
    } catch (const c10::NotImplementedError& e) {
      if (!refuses_unsigned(e)) throw;
      stack->resize(base);
      stack->insert(stack->end(), saved.begin(), saved.end());
      remember(key, false);
    }
  }
  run_widened(op, stack, base, num_args, name);
}

c10::ScalarType host_factory_type(c10::ScalarType type, const char* op) {
  if (!is_wide_unsigned(type)) return type;
  runtime::metrics::count(std::string("vpu.widened_to_int64.") + op);
  return c10::kLong;
}

}  // namespace torchtpu::aten
