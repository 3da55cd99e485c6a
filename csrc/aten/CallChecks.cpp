// Argument checks made at the call (docs/design.md, "Errors at the call").
//
// Ops that write their arguments (in-place and out= ops) run their CPU kernels later: on a
// stream's worker (strict eager) or inside a fused region (fused eager), where the kernels' own
// argument checks would surface at the next synchronization, or never when fused eager drops a
// dead result. For each new call signature, the entry kernel runs at the call, on the issuing
// thread, the op's meta kernel on meta copies of the arguments and the op's CPU kernel on
// scratch copies of them; when either refuses, the call runs at once (debug eager's way), so
// that the CPU kernel raises its own error, with its type and message, at the call. A few checks
// that scratch copies cannot reproduce are made by name, with the CPU's messages:
//
// - an out= tensor whose elements overlap (an expanded tensor): written by several elements;
// - an out= tensor sharing memory with an input, where the CPU kernel refuses it (cat, gather,
//   take, masked_select, kthvalue, index_select);
// - masked_fill_'s value tensor (its value is read), and the checks of ops whose kernels run at
//   the call but after torchtpu's own sizing (gelu's `approximate`, layer norm's shapes,
//   bucketize's boundaries, _scaled_mm's shapes, antialiased interpolation's dtypes, ...).
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/OpTraits.h"
#include "aten/Unsigned.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include "pytorch/Internals.h"
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace torchtpu::aten {
namespace {

using Stack = torch::jit::Stack;

const at::Tensor* tensor_at(const Stack& stack, size_t base, size_t i) {
  const c10::IValue& v = stack[base + i];
  return v.isTensor() ? &v.toTensor() : nullptr;
}

bool on_device(const at::Tensor* t) {
  return t != nullptr && t->defined() && t->device().is_privateuseone();
}

void check_out_dtype_like_self(const Stack& stack, size_t base, size_t self, size_t out) {
  const at::Tensor* s = tensor_at(stack, base, self);
  const at::Tensor* o = tensor_at(stack, base, out);
  if (s == nullptr || o == nullptr) return;
  // (the message of the structured out= wrappers' resize_out)
  TORCH_CHECK(o->dtype() == s->dtype(), "Expected out tensor to have dtype ", s->dtype(),
              ", but got ", o->dtype(), " instead");
}

template <typename T>
void convertible(const c10::Scalar& value) {
  (void)value.to<T>();  // raises "value cannot be converted to type T without overflow"
}

void check_fill_value(const at::Tensor& self, const c10::Scalar& value) {
  const auto type = self.scalar_type();
  if (c10::isFloat8Type(type) || c10::isBarebonesUnsignedType(type)) return;  // (kernel's)
  AT_DISPATCH_V2(self.scalar_type(), "masked_fill_", AT_WRAP([&] { convertible<scalar_t>(value); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kBool, at::kHalf, at::kBFloat16,
                 at::kComplexHalf);
}

void masked_fill_checks(const Stack& stack, size_t base) {
  const at::Tensor& self = stack[base].toTensor();
  const at::Tensor& mask = stack[base + 1].toTensor();
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.dtype());
  const c10::IValue& value = stack[base + 2];
  if (value.isTensor()) {
    const at::Tensor& v = value.toTensor();
    TORCH_CHECK(v.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got "
                "tensor with ", v.dim(), " dimension(s).");
    // The value is read now (CUDA's kernel reads it at the call too) when it is on the CPU or
    // of another dtype than self, which is when the conversion can fail; a device value of
    // self's dtype is left to the kernel (no synchronization), as is any device value in a dry
    // run (it has none).
    if (v.device().is_cpu() || (v.scalar_type() != self.scalar_type() && !runtime::dry_run())) {
      check_fill_value(self, v.item());
    }
  } else {
    check_fill_value(self, value.toScalar());
  }
}

void masked_scatter_checks(const Stack& stack, size_t base) {
  const at::Tensor& mask = stack[base + 1].toTensor();
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
}

void gelu_checks(const Stack& stack, size_t base) {
  const std::string_view approximate = stack[base + 1].toStringView();
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
}

void layer_norm_checks(const Stack& stack, size_t base) {
  const at::Tensor& input = stack[base].toTensor();
  const auto shape = stack[base + 1].toIntVector();
  const auto weight = stack[base + 2].toOptional<at::Tensor>();
  const auto bias = stack[base + 3].toOptional<at::Tensor>();
  at::native::_check_layer_norm_inputs(input, shape, weight.value_or(at::Tensor()),
                                       bias.value_or(at::Tensor()));
}

void bucketize_checks(const Stack& stack, size_t base) {
  const at::Tensor& boundaries = stack[base + 1].toTensor();
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
}

void complex_out_checks(const Stack& stack, size_t base) {
  const at::Tensor& real = stack[base].toTensor();
  const at::Tensor& out = stack[base + 2].toTensor();
  const auto expected = c10::toComplexType(real.scalar_type());
  TORCH_CHECK(out.scalar_type() == expected, "Expected object of scalar type ", expected,
              " but got scalar type ", out.scalar_type(), " for argument 'out'");
}

void amax_amin_out_checks(const Stack& stack, size_t base) {
  const at::Tensor& self = stack[base].toTensor();
  const at::Tensor& out = stack[base + 3].toTensor();
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
}

void aminmax_out_checks(const Stack& stack, size_t base) {
  check_out_dtype_like_self(stack, base, 0, 3);
  check_out_dtype_like_self(stack, base, 0, 4);
}

void gather_out_checks(const Stack& stack, size_t base) {
  check_out_dtype_like_self(stack, base, 0, 4);
}

// Kernels that refuse an out= tensor sharing any memory with an input (the input at `input`,
// the out= tensors from `first_out`).
template <size_t input, size_t first_out, size_t outs = 1>
void out_apart_from_input(const Stack& stack, size_t base) {
  const at::Tensor* in = tensor_at(stack, base, input);
  if (in == nullptr || !in->defined()) return;
  for (size_t i = first_out; i < first_out + outs; ++i) {
    const at::Tensor* out = tensor_at(stack, base, i);
    if (out != nullptr && out->defined()) at::assert_no_overlap(*out, *in);
  }
}

void gather_out_checks_all(const Stack& stack, size_t base) {
  gather_out_checks(stack, base);
  out_apart_from_input<0, 4>(stack, base);
  out_apart_from_input<2, 4>(stack, base);
}

void masked_select_out_checks(const Stack& stack, size_t base) {
  out_apart_from_input<0, 2>(stack, base);
  out_apart_from_input<1, 2>(stack, base);
}

void take_out_checks(const Stack& stack, size_t base) {
  out_apart_from_input<0, 2>(stack, base);
  out_apart_from_input<1, 2>(stack, base);
}

void cat_out_checks(const Stack& stack, size_t base) {
  const at::Tensor& out = stack[base + 2].toTensor();
  for (const c10::IValue& t : stack[base].toListRef()) {
    if (t.isTensor() && t.toTensor().defined()) at::assert_no_overlap(out, t.toTensor());
  }
}

// _scaled_mm's shapes (its meta function, which fused eager records with, does not check them).
void scaled_mm_checks(const Stack& stack, size_t base) {
  const at::Tensor& a = stack[base].toTensor();
  const at::Tensor& b = stack[base + 1].toTensor();
  TORCH_CHECK(a.dim() == 2, "mat1 must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0),
              "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

// Antialiased bilinear and bicubic interpolation: the CPU kernel computes its weights in the
// input's dtype, float32 and float64 only (raised at the call as on the CPU: fused eager would
// otherwise drop the failing op with its unused result).
void antialias_upsample_checks(const Stack& stack, size_t base) {
  const at::Tensor& input = stack[base].toTensor();
  const c10::ScalarType dtype = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(dtype != c10::kBFloat16 && dtype != c10::kHalf,
                              "\"compute_index_ranges_weights\" not implemented for '",
                              c10::toString(dtype), "'");
}

using Specific = void (*)(const Stack&, size_t);

const std::unordered_map<std::string_view, Specific>& specific_checks() {
  static const std::unordered_map<std::string_view, Specific> table = {
      {"aten::masked_fill_.Scalar", masked_fill_checks},
      {"aten::masked_fill_.Tensor", masked_fill_checks},
      {"aten::masked_fill.Scalar", masked_fill_checks},
      {"aten::masked_fill.Tensor", masked_fill_checks},
      {"aten::masked_fill.Scalar_out", masked_fill_checks},
      {"aten::masked_fill.Tensor_out", masked_fill_checks},
      {"aten::masked_scatter_", masked_scatter_checks},
      {"aten::masked_scatter", masked_scatter_checks},
      {"aten::gelu", gelu_checks},
      {"aten::gelu_", gelu_checks},
      {"aten::gelu.out", gelu_checks},
      {"aten::native_layer_norm", layer_norm_checks},
      {"aten::bucketize.Tensor", bucketize_checks},
      {"aten::bucketize.Tensor_out", bucketize_checks},
      {"aten::complex.out", complex_out_checks},
      {"aten::polar.out", complex_out_checks},
      {"aten::amax.out", amax_amin_out_checks},
      {"aten::amin.out", amax_amin_out_checks},
      {"aten::aminmax.out", aminmax_out_checks},
      {"aten::gather.out", gather_out_checks_all},
      {"aten::take.out", take_out_checks},
      {"aten::masked_select.out", masked_select_out_checks},
      {"aten::kthvalue.values", out_apart_from_input<0, 4, 2>},
      {"aten::index_select.out", out_apart_from_input<0, 3>},
      {"aten::cat.out", cat_out_checks},
      {"aten::_scaled_mm", scaled_mm_checks},
      {"aten::_scaled_mm.out", scaled_mm_checks},
      {"aten::_upsample_bilinear2d_aa", antialias_upsample_checks},
      {"aten::_upsample_bilinear2d_aa.out", antialias_upsample_checks},
      {"aten::_upsample_bicubic2d_aa", antialias_upsample_checks},
      {"aten::_upsample_bicubic2d_aa.out", antialias_upsample_checks},
  };
  return table;
}

}  // namespace

CallChecks call_checks_of(const c10::OperatorHandle& op, Capture capture, bool cpu_kernel_later) {
  CallChecks checks;
  const auto& args = op.schema().arguments();
  bool writes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_out() && args[i].type()->kind() == c10::TypeKind::TensorType) {
      checks.outs.push_back(static_cast<uint8_t>(i));
    }
    if (args[i].alias_info() != nullptr && args[i].alias_info()->isWrite()) writes = true;
  }
  // In-place and out= ops of the host executor run their CPU kernels later (a worker, a fused
  // region); its functional ops too where fused eager records them. (Random ops run at the
  // call, their generator's advance known only then.)
  checks.recorded = !writes && capture == Capture::new_results;
  const bool later =
      (writes || checks.recorded) && cpu_kernel_later && capture != Capture::random;
  checks.cpu = later && op.hasKernelForAnyDispatchKey(c10::DispatchKeySet(
                            {c10::DispatchKey::CPU, c10::DispatchKey::CompositeExplicitAutograd,
                             c10::DispatchKey::CompositeExplicitAutogradNonFunctional}));
  checks.meta = later && op.hasKernelForAnyDispatchKey(c10::DispatchKeySet(
                             {c10::DispatchKey::Meta, c10::DispatchKey::CompositeImplicitAutograd,
                              c10::DispatchKey::CompositeExplicitAutograd,
                              c10::DispatchKey::CompositeExplicitAutogradNonFunctional}));
  if (auto it = specific_checks().find(op_name(op)); it != specific_checks().end()) {
    checks.specific = it->second;
  }
  return checks;
}

bool from_python(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj() != nullptr;
}

namespace {
struct DiscardWarnings final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};
}  // namespace

QuietWarnings::QuietWarnings() : previous_(c10::WarningUtils::get_warning_handler()) {
  static DiscardWarnings discard;
  c10::WarningUtils::set_warning_handler(&discard);
}
QuietWarnings::~QuietWarnings() { c10::WarningUtils::set_warning_handler(previous_); }

namespace {

// Is the out= tensor one of the op's inputs (an in-place call through the out= variant)?
bool is_an_input(const Stack& stack, size_t base, size_t num_args, const CallChecks& checks,
                 const at::Tensor& out) {
  for (size_t i = 0; i < num_args; ++i) {
    if (std::find(checks.outs.begin(), checks.outs.end(), i) != checks.outs.end()) continue;
    const c10::IValue& v = stack[base + i];
    if (v.isTensor() && v.toTensor().unsafeGetTensorImpl() == out.unsafeGetTensorImpl()) {
      return true;
    }
  }
  return false;
}

// The metadata of a call's arguments as a 128-bit key (op, then for each argument a tag and its
// sizes, strides, dtype or value), hashed as it is read, without building it: false where an
// argument has no such key (an object, a generator). Two calls of other signatures share a key
// with a probability of about 2^-128 per pair; the price of one would be an argument error
// reported at the next synchronization instead of at the call.
struct Signature {
  uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
  void put(int64_t v) {
    const uint64_t x = static_cast<uint64_t>(v);
    a = (a ^ x) * 0x9e3779b97f4a7c15ULL;
    a ^= a >> 29;
    b = (b + x) * 0xbf58476d1ce4e5b9ULL;
    b ^= b >> 31;
  }
  bool operator==(const Signature& o) const { return a == o.a && b == o.b; }
};
struct SignatureHash {
  size_t operator()(const Signature& s) const { return static_cast<size_t>(s.a ^ (s.b << 1)); }
};

bool signature_of(const c10::OperatorHandle& op, const Stack& stack, size_t base, size_t num_args,
                  Signature& key) {
  key = Signature();
  auto put = [&](int64_t v) { key.put(v); };
  auto put_tensor = [&](const at::Tensor& t) {
    if (!t.defined()) return put(-1);
    put(static_cast<int64_t>(t.scalar_type()) | (static_cast<int64_t>(t.layout()) << 8) |
        (static_cast<int64_t>(t.device().type()) << 16) | (int64_t(t.device().index()) << 32) |
        (int64_t(t.is_conj()) << 48) | (int64_t(t.is_neg()) << 49) |
        (int64_t(t.unsafeGetTensorImpl()->is_wrapped_number()) << 50));
    put(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) put(t.sizes()[d]), put(t.strides()[d]);
    put(t.storage_offset());
  };
  // Which earlier argument a tensor argument is (an in-place call through an out= variant: the
  // CPU kernel refuses to resize an out= tensor that is also an input), else -1.
  auto put_identity = [&](size_t i, const at::Tensor& t) {
    int64_t same = -1;
    for (size_t j = 0; j < i && same < 0; ++j) {
      const c10::IValue& w = stack[base + j];
      if (w.isTensor() && t.defined() &&
          w.toTensor().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        same = static_cast<int64_t>(j);
      }
    }
    put(same);
  };
  put(reinterpret_cast<int64_t>(&op.schema()));
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& v = stack[base + i];
    if (v.isTensor()) {
      put(1), put_tensor(v.toTensor()), put_identity(i, v.toTensor());
    } else if (v.isNone()) {
      put(2);
    } else if (v.isInt() || v.isBool()) {
      put(3), put(v.isInt() ? v.toInt() : int64_t(v.toBool()));
    } else if (v.isDouble()) {
      const double d = v.toDouble();
      int64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
      put(4), put(bits);
    } else if (v.isScalar()) {  // (a complex or symbolic number)
      return false;
    } else if (v.isIntList()) {
      put(5);
      for (int64_t x : v.toIntVector()) put(x);
      put(INT64_MIN);
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      put(6);
      for (const c10::IValue& t : v.toListRef()) {
        if (!t.isNone() && !t.isTensor()) return false;
        put_tensor(t.isNone() ? at::Tensor() : t.toTensor());
      }
      put(INT64_MIN);
    } else if (v.isString()) {
      const std::string_view text = v.toStringView();
      put(7), put(static_cast<int64_t>(text.size()));
      for (char c : text) put(c);
    } else {
      return false;
    }
  }
  return true;
}

// Calls whose meta kernel accepted their arguments (and found their out= tensors of the right
// shape), by signature, per thread: the same call again needs no second meta call. Meta kernels
// of many ops are Python (PyTorch's torch._refs and meta registrations), 0.1-1 ms a call.
// Each keeps the warnings its CPU kernel check made (none for most), made again at every call
// of the signature, as the CPU kernel makes them at every call.
using Warnings = std::shared_ptr<const std::vector<c10::Warning>>;
struct Checked {
  Warnings warnings;
  bool by_cpu_kernel = false;  // (else by the meta kernel, or only out= shapes)
};
std::unordered_map<Signature, Checked, SignatureHash>& checked_calls() {
  thread_local std::unordered_map<Signature, Checked, SignatureHash> checked;
  return checked;
}

// Collects the warnings made while one is alive on this thread.
class CollectedWarnings final : public c10::WarningHandler {
 public:
  CollectedWarnings() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~CollectedWarnings() override { c10::WarningUtils::set_warning_handler(previous_); }
  CollectedWarnings(const CollectedWarnings&) = delete;
  CollectedWarnings& operator=(const CollectedWarnings&) = delete;
  void process(const c10::Warning& warning) override { warnings.push_back(warning); }
  std::vector<c10::Warning> warnings;

 private:
  c10::WarningHandler* previous_;
};


// The op's CPU kernel run at the call on scratch copies of its device tensors (fresh zeroed host
// memory with the same sizes, strides, offsets, dtypes and view bits, arguments sharing a device
// storage sharing a scratch one, written CPU tensors cloned), its warnings dropped: the argument
// checks the CPU kernel makes, whatever they are, with nothing to list. True when it raised
// (perhaps over a value of the scratch data: the caller then runs the real call at once, which
// decides). An exception that stops the program (a KeyboardInterrupt) goes on up. Not run for tensors without a plain strided storage and when the scratch memory
// would exceed kMaxScratchBytes: such calls are left to the meta kernel's checks.
constexpr size_t kMaxScratchBytes = size_t(16) << 20;

enum class Verdict { passed, refused, not_run };

Verdict cpu_kernel_check(const c10::OperatorHandle& op, const Stack& stack, size_t base,
                         size_t num_args, Warnings* warnings) {
  Stack scratch(stack.begin() + static_cast<std::ptrdiff_t>(base),
                stack.begin() + static_cast<std::ptrdiff_t>(base + num_args));
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages;
  // One scratch tensor for each device tensor: an argument passed twice (self and out= of an
  // in-place call through the out= variant) is one tensor to the CPU kernel too.
  std::unordered_map<const c10::TensorImpl*, at::Tensor> copies;
  size_t bytes = 0;
  bool runnable = true;
  // (Never write the caller's CPU tensors: those the op writes are cloned.)
  const auto& args = op.schema().arguments();
  for (size_t i = 0; i < num_args && i < args.size(); ++i) {
    if (args[i].alias_info() == nullptr || !args[i].alias_info()->isWrite()) continue;
    if (scratch[i].isTensor() && scratch[i].toTensor().defined() &&
        scratch[i].toTensor().device().is_cpu()) {
      scratch[i] = scratch[i].toTensor().clone();
    }
  }
  map_tensor_arguments(&scratch, 0, num_args, [&](const at::Tensor& t) -> at::Tensor {
    if (!runnable || !on_device(&t)) return t;
    if (auto copy = copies.find(t.unsafeGetTensorImpl()); copy != copies.end()) {
      return copy->second;
    }
    if (t.layout() != at::kStrided || t.is_quantized() || !t.has_storage()) {
      runnable = false;
      return t;
    }
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = storages.find(key);
    if (it == storages.end()) {
      const size_t n = t.storage().nbytes();
      bytes += n;
      if (bytes > kMaxScratchBytes) {
        runnable = false;
        return t;
      }
      it = storages.emplace(key, at::zeros({static_cast<int64_t>(n)}, at::kByte).storage())
               .first;
    }
    at::Tensor copy =
        with_view_bits(host_alias_over(it->second, t.sizes(), t.strides(), t.storage_offset(),
                                       t.dtype(), /*resizable=*/true),
                       t.is_conj(), t.is_neg());
    copies.emplace(t.unsafeGetTensorImpl(), copy);
    return copy;
  });
  if (!runnable) return Verdict::not_run;
  static runtime::metrics::Counter runs("calls.cpu_kernel_checks");
  runs.add();
  CollectedWarnings collected;
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &scratch);
  } catch (const std::exception&) {
    if (runtime::stops_program(std::current_exception())) throw;
    return Verdict::refused;
  }
  if (!collected.warnings.empty()) {
    *warnings = std::make_shared<const std::vector<c10::Warning>>(std::move(collected.warnings));
  }
  return Verdict::passed;
}

// The op's meta kernel on meta copies of the call's arguments (one copy per distinct tensor, as
// in cpu_kernel_check); its out= arguments' meta copies in *meta_outs, in checks.outs' order.
// Refused when the meta kernel threw (or there is none).
Verdict meta_kernel_check(const c10::OperatorHandle& op, const CallChecks& checks,
                          const Stack& stack, size_t num_args, std::vector<at::Tensor>* meta_outs) {
  static runtime::metrics::Counter checked("calls.meta_checks");
  checked.add();
  Stack meta(stack.end() - num_args, stack.end());
  std::unordered_map<const c10::TensorImpl*, at::Tensor> copies;
  map_tensor_arguments(&meta, 0, meta.size(), [&](const at::Tensor& t) {
    if (!t.defined()) return to_meta(t);
    auto copy = copies.find(t.unsafeGetTensorImpl());
    if (copy == copies.end()) copy = copies.emplace(t.unsafeGetTensorImpl(), to_meta(t)).first;
    return copy->second;
  });
  for (uint8_t i : checks.outs) {
    meta_outs->push_back(meta[i].isTensor() ? meta[i].toTensor() : at::Tensor());
  }
  try {
    call_meta(op, meta);
    return Verdict::passed;
  } catch (const std::exception&) {
    // (Meta kernels may be Python: a Ctrl-C met there is the program's, not the call's.)
    if (runtime::stops_program(std::current_exception())) throw;
    return Verdict::refused;
  }
}

// The call's device out= tensors given the meta kernel's geometry where their shape differs
// (the meta function warned as the CPU warns). True when one was resized.
bool resize_outs(const CallChecks& checks, Stack& stack, size_t base,
                 const std::vector<at::Tensor>& meta_outs) {
  bool resized = false;
  for (size_t k = 0; k < checks.outs.size(); ++k) {
    const at::Tensor* out = tensor_at(stack, base, checks.outs[k]);
    const at::Tensor& m = meta_outs[k];
    if (!on_device(out) || !m.defined() || m.sizes() == out->sizes()) continue;
    out->resize_(m.sizes());
    if (m.strides() != out->strides()) out->as_strided_(m.sizes(), m.strides());
    resized = true;
  }
  return resized;
}

// The op's meta kernel run on meta copies of the arguments, once per call signature and thread:
// the CPU kernel's argument checks (dtypes of out= and in-place results, shapes, scalar
// conversions the meta function makes) at the call. False when it refused the arguments.
//
// Also: a non-empty out= tensor of another shape than the op's result is resized at the call, as
// the CPU resizes it (with its warning), before the op is queued or recorded: the result's shape
// is the meta kernel's (which resizes its meta out= tensors and warns as the CPU does). Only for
// out= tensors handed in from Python (PyTorch's structured functional ops pass their out=
// variant results they just sized with that same meta function), and not for out= tensors that
// are inputs too (in-place calls through an out= variant, whose meta functions check the shape).
// Counted: "calls.meta_checks" (meta kernel runs) in torchtpu.metrics.counters().
bool meta_check(const c10::OperatorHandle& op, const CallChecks& checks, Stack& stack,
                size_t num_args) {
  const size_t base = stack.size() - num_args;
  bool resize = false;
  for (uint8_t i : checks.outs) {
    const at::Tensor* out = tensor_at(stack, base, i);
    if (on_device(out) && out->numel() != 0 && from_python(*out) &&
        !is_an_input(stack, base, num_args, checks, *out)) {
      resize = true;
    }
  }
  // In debug eager the CPU kernel runs at the call anyway: only out= shapes are left to do. (So
  // does a functional op outside fused eager.)
  const bool later = (checks.meta || checks.cpu) &&
                     (checks.recorded ? runtime::eager_mode() == runtime::EagerMode::fused
                                      : runtime::asynchronous());
  if (!resize && !later) return true;
  Signature key;
  const bool keyed = signature_of(op, stack, base, num_args, key);
  key.put(later);  // (a call checked in debug eager for its out= shapes alone is not checked)
  auto& known = checked_calls();
  // Out= tensors made in C++ come from PyTorch's structured functional or in-place wrapper,
  // which made the call's warnings already (its meta function): they are not made again.
  bool wrapped = !checks.outs.empty();
  for (uint8_t i : checks.outs) {
    const at::Tensor* out = tensor_at(stack, base, i);
    if (out == nullptr || !out->defined() || from_python(*out)) wrapped = false;
  }
  auto warn_again = [&](const Warnings& warnings) {
    if (warnings == nullptr || wrapped) return;
    for (const c10::Warning& w : *warnings) c10::warn(w);
  };
  if (keyed) {
    if (auto it = known.find(key); it != known.end()) {
      warn_again(it->second.warnings);
      set_call_warned(it->second.by_cpu_kernel);
      return true;
    }
  }
  Warnings warnings;
  Verdict cpu = Verdict::not_run;
  auto remember = [&] {
    constexpr size_t kKept = 4096;  // signatures per thread; all dropped when full
    if (!keyed) return;
    if (known.size() >= kKept) known.clear();
    known.emplace(key, Checked{warnings, cpu == Verdict::passed});
  };
  // The CPU kernel on scratch copies: the CPU's own checks. Where it cannot run (large or
  // unusual tensors), the meta kernel's checks instead.
  if (later && checks.cpu) cpu = cpu_kernel_check(op, stack, base, num_args, &warnings);
  if (cpu == Verdict::passed) set_call_warned(true);
  if (cpu == Verdict::refused) {
    static runtime::metrics::Counter refused("calls.cpu_kernel_refused");
    refused.add();
    return false;
  }
  // The meta kernel: its checks (where the CPU kernel did not check) and the out= shapes.
  const bool meta_checks = later && checks.meta && cpu == Verdict::not_run;
  std::vector<at::Tensor> meta_outs;
  Verdict meta = Verdict::not_run;
  if (meta_checks || resize) {
    meta = meta_kernel_check(op, checks, stack, num_args, &meta_outs);
    if (meta == Verdict::refused && meta_checks) {
      static runtime::metrics::Counter refused("calls.meta_refused");
      refused.add();
      return false;  // (not remembered: the call runs at once, and its kernel decides)
    }
    // (Refused without checks to make: no meta kernel, or debug eager, where the kernel runs
    // now with the CPU's messages.)
  }
  const bool sized = meta == Verdict::passed;
  // The CPU kernel's warnings, as the call's (where the meta kernel sized out= tensors, it made
  // them already: the same structured meta function).
  if (!(resize && sized)) warn_again(warnings);
  const bool resized = resize && sized && resize_outs(checks, stack, base, meta_outs);
  // (A call that resized is not remembered: the same call again warns again, as on the CPU.)
  if (!resized) remember();
  return true;
}

}  // namespace

bool check_at_call(const c10::OperatorHandle& op, const CallChecks& checks, Stack& stack,
                   size_t num_args) {
  const size_t base = stack.size() - num_args;
  set_unsigned_at_once(false);
  for (uint8_t i : checks.outs) {
    const at::Tensor* out = tensor_at(stack, base, i);
    // (PyTorch's out= kernels refuse an out= tensor whose elements share memory.)
    if (on_device(out)) at::assert_no_internal_overlap(*out);
  }
  if (checks.specific != nullptr) checks.specific(stack, base);
  // A call on uint16/32/64 not known to run as it is on the CPU kernel (aten/Unsigned.h) runs
  // at once: its first run finds whether it needs int64, which queued and fused work cannot.
  if ((checks.meta || checks.cpu) && has_unsigned_operand(op, stack, base, num_args) &&
      !unsigned_runs_natively(op, stack, base, num_args)) {
    set_unsigned_at_once(true);
    return false;
  }
  if (checks.outs.empty() && !checks.meta && !checks.cpu) return true;
  return meta_check(op, checks, stack, num_args);
}

}  // namespace torchtpu::aten
