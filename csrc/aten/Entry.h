#pragma once
// The one entry of every PrivateUse1 kernel of torchtpu (docs/design.md 3).
//
// Every kernel is registered through entry() (the view ops, which touch no device memory,
// through view_entry(): counted, unboxed): before the kernel runs, the entry hook sees the
// op, its boxed arguments and what kind of op it is (Capture below). The DeferAndFuse layer
// (defer/) installs the hook: in fused eager it records the op instead of running it, or
// materializes the pending work the op depends on and lets it run. The hook is not called
// for ops that a torchtpu kernel calls while it runs (KernelScope), so kernels are free to
// use aten ops on TPU tensors internally.
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "aten/DryRun.h"
#include "aten/OpTraits.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"

#include <atomic>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace torchtpu::aten {

// "aten::add.out": the op's schema name with its overload.
std::string op_name(const c10::OperatorHandle& op);
// For each return of the schema, the argument it writes (in-place and out= ops), or -1.
std::vector<int> returned_arguments(const c10::FunctionSchema& schema);

// Applies `f` to every tensor slot among stack[base, base + count) (tensors, tensor lists,
// optional tensor lists), replacing each tensor with what `f` returns.
template <typename F>
void map_tensor_arguments(torch::jit::Stack* stack, size_t base, size_t num_args, F&& f) {
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& slot = (*stack)[base + i];
    if (slot.isTensor()) {
      slot = f(slot.toTensor());
    } else if (slot.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : slot.toTensorList()) list.push_back(f(t));
      slot = list;
    } else if (slot.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const auto& item : slot.toOptionalTensorList()) {
        const std::optional<at::Tensor> t = item;
        list.push_back(t.has_value() ? std::optional<at::Tensor>(f(*t)) : std::nullopt);
      }
      slot = list;
    }
  }
}

// Calls `f` on every tensor among stack[base, base + num_args) (tensors, tensor lists, the
// present items of optional tensor lists), changing nothing (map_tensor_arguments' reading
// counterpart).
template <typename F>
void for_each_tensor_argument(const torch::jit::Stack& stack, size_t base, size_t num_args,
                              F&& f) {
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& slot = stack[base + i];
    if (slot.isTensor()) {
      f(slot.toTensor());
    } else if (slot.isTensorList()) {
      for (const at::Tensor& t : slot.toTensorList()) f(t);
    } else if (slot.isOptionalTensorList()) {
      for (const auto& item : slot.toOptionalTensorList()) {
        const std::optional<at::Tensor> t = item;
        if (t.has_value()) f(*t);
      }
    }
  }
}

// Lists of tensors that the JIT builds (Tensor?[] of a scripted index_put_) carry element types
// of their own, which isTensorList() / isOptionalTensorList() do not recognize (they compare
// type pointers); every op entering torchtpu gets them as the typed lists the rest of the
// layers expect. Cheap: a tag check per argument.
inline void normalize_tensor_lists(torch::jit::Stack* stack, size_t num_args) {
  const size_t base = stack->size() - num_args;
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& slot = (*stack)[base + i];
    if (!slot.isList() || slot.isTensorList() || slot.isOptionalTensorList()) continue;
    const c10::List<c10::IValue> items = slot.toList();
    const c10::TypePtr& type = items.elementType();
    if (type->kind() == c10::TypeKind::TensorType) {
      c10::List<at::Tensor> list;
      for (const c10::IValue& item : items) list.push_back(item.toTensor());
      slot = list;
    } else if (type->kind() == c10::TypeKind::OptionalType &&
               type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                   c10::TypeKind::TensorType) {
      c10::List<std::optional<at::Tensor>> list;
      for (const c10::IValue& item : items) {
        list.push_back(item.isNone() ? std::nullopt : std::optional<at::Tensor>(item.toTensor()));
      }
      slot = list;
    }
  }
}

// What an op is, as far as deferring it goes.
enum class Capture {
  factory,                // empty / empty_strided: the storage may be left pending
  view,                   // makes a view of its input; never touches device memory
  results_are_arguments,  // in-place and out= ops: writes (already sized) arguments
  new_results,            // returns new tensors, sized by the op's meta kernel
  copy,                   // _copy_from: a device copy or cast, or a transfer
  random,                 // draws random numbers from a device generator
  host_read,              // reads device memory on the host (.item())
  fallback,               // the CPU fallback
  foreach,                // a foreach op (_foreach_mul_): one launch over its lists where ops
                          // run at once (and in a dry run); run as its per-tensor ops
                          // (run_per_tensor) where ops are recorded (fused eager, a capture)
  none,                   // anything else: runs now, after the pending work it depends on
};

// Runs a foreach op as PyTorch's per-tensor decomposition (its CompositeExplicitAutograd kernel):
// each per-tensor op enters torchtpu on its own, to be recorded or run. Call it outside a
// torchtpu kernel (from the entry hook), where those ops are seen.
void run_per_tensor(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Returns true when it handled the op (the results are on the stack); false to run the kernel.
// `traits`: the op's (OpTraits.h) and `name` its op_name(), found once per kernel.
using EntryHook = bool (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                           Capture capture, const OpTraits& traits, const std::string& name);
void set_entry_hook(EntryHook hook);
EntryHook entry_hook();

// True while a torchtpu kernel runs on this thread.
bool inside_kernel();

// Was the tensor handed in from Python (it has a Python object)? PyTorch's structured functional
// and in-place kernels allocate their results in C++ and pass them straight to the out= variant,
// sized (and warned about) by the op's meta function: those have none yet.
bool from_python(const at::Tensor& t);

// While one is alive on this thread, PyTorch's warnings (TORCH_WARN) are dropped: for CPU
// kernels run for checks on scratch copies, or run as device work whose warnings the call made
// already (aten/CallChecks.cpp, aten/HostExecution.cpp).
class QuietWarnings {
 public:
  QuietWarnings();
  ~QuietWarnings();
  QuietWarnings(const QuietWarnings&) = delete;
  QuietWarnings& operator=(const QuietWarnings&) = delete;

 private:
  c10::WarningHandler* previous_;
};

// Argument checks made on the issuing thread at the call, before the op is queued or recorded
// (aten/CallChecks.cpp): the checks that otherwise live only inside CPU kernels run later.
struct CallChecks {
  c10::SmallVector<uint8_t, 2> outs;  // the out= tensor arguments (no internal overlap)
  void (*specific)(const torch::jit::Stack& stack, size_t base) = nullptr;  // the op's own
  // The op writes its arguments (in-place and out= ops) and its kernel runs PyTorch's CPU kernel
  // later, on a worker or in a fused region, where that kernel makes its argument checks: each
  // new call signature is checked at the call by the CPU kernel run on scratch copies of the
  // arguments (`cpu`), or by its meta kernel (`meta`: it has one) where scratch copies are too
  // large. (torchtpu's own kernels check their arguments on the calling thread themselves.)
  // Functional ops of the host executor (`recorded`) run their CPU kernel later only where fused
  // eager records them (elsewhere they run at the call): checked at the call in fused eager alone.
  bool meta = false;
  bool cpu = false;
  bool recorded = false;
  bool any() const { return !outs.empty() || specific != nullptr || meta || cpu; }
};
CallChecks call_checks_of(const c10::OperatorHandle& op, Capture capture, bool cpu_kernel_later);
// Whether the CPU kernel's warnings of the op entering now on this thread were made at its call
// (by its scratch check, check_at_call): its device work then runs with warnings dropped
// (QuietWarnings), wherever and whenever it runs. Reset as each op enters torchtpu.
bool call_warned();
void set_call_warned(bool warned);
// Raises the argument errors found at the call. Returns false when the op's meta kernel refused
// the arguments: the call is then run at once, synchronously (runtime::OpModeScope::
// run_synchronously), so that the CPU kernel raises its own error, with its own type and
// message, at the call (or computes the result, where the meta kernel is stricter than the CPU).
bool check_at_call(const c10::OperatorHandle& op, const CallChecks& checks,
                   torch::jit::Stack& stack, size_t num_args);
// While one is alive, PyTorch's deterministic-algorithms setting is the one given (the setting
// when the op was called: torch.use_deterministic_algorithms picks CPU kernels' algorithms, and
// device work runs later, on a worker or at a fused graph's flush). The setting is the
// process's; it is restored at the end.
class DeterministicAlgorithms {
 public:
  struct Setting {
    bool on = false;
    bool warn_only = false;
    static Setting now();
  };
  explicit DeterministicAlgorithms(Setting setting);
  ~DeterministicAlgorithms();
  DeterministicAlgorithms(const DeterministicAlgorithms&) = delete;
  DeterministicAlgorithms& operator=(const DeterministicAlgorithms&) = delete;

 private:
  std::optional<Setting> previous_;
};

// While one is alive, a torchtpu kernel runs on this thread (inside_kernel()); off the thread
// that keeps the process's OpenMP team, the team its loops started ends with the outermost one
// (runtime/OpenMP.h).
class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
};

class EntryKernel final : public c10::OperatorKernel {
 public:
  // `cpu_kernel_later`: the kernel runs PyTorch's CPU kernel later (on a stream's worker or in a
  // fused region: the host executor's ops), so the CPU kernel's argument checks are made at the
  // call (CallChecks).
  EntryKernel(c10::KernelFunction kernel, Capture capture, bool cpu_kernel_later = false)
      : kernel_(std::move(kernel)), capture_(capture), cpu_kernel_later_(cpu_kernel_later) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    // The op runs in the eager mode in force as it enters (runtime/Mode.h, OpModeScope).
    const runtime::OpModeScope mode;
    if (capture_ == Capture::fallback || takes_tensor_lists(op)) {  // (one fallback, many ops)
      normalize_tensor_lists(stack, op.schema().arguments().size());
    }
    if (!inside_kernel()) {
      set_call_warned(false);
      if (capture_ != Capture::fallback) {  // (the fallback runs the CPU kernel at the call)
        const CallChecks& c = checks(op);
        if (c.any() && !check_at_call(op, c, *stack, op.schema().arguments().size())) {
          runtime::OpModeScope::run_synchronously();
        }
      }
      if (runtime::dry_run()) {
        // A dry run: metadata and a charge, no device work (aten/DryRun.h).
        if (dry_run_op(op, stack, capture_, traits(op), name(op))) {
          if (capture_ != Capture::fallback) count(op);
          return;
        }
      } else if (EntryHook hook = entry_hook();
                 hook != nullptr && hook(op, stack, capture_, traits(op), name(op))) {
        return;
      }
    }
    // Every op a torchtpu kernel runs is counted here, once, under its schema name (the CPU
    // fallback counts its ops as fallbacks).
    if (capture_ != Capture::fallback) count(op);
    const KernelScope scope;
    kernel_.callBoxed(op, keys, stack);
  }

 private:
  void count(const c10::OperatorHandle& op) {
    std::atomic<int64_t>* slot = slot_.load(std::memory_order_acquire);
    if (slot == nullptr) {
      slot = &runtime::metrics::slot(runtime::metrics::Category::op, op_name(op));
      slot_.store(slot, std::memory_order_release);
    }
    slot->fetch_add(1, std::memory_order_relaxed);
  }

  // The name and traits are found once per kernel, except for the CPU fallback: one kernel
  // registered for every op without a native one.
  const std::string& name(const c10::OperatorHandle& op) {
    if (capture_ == Capture::fallback) {
      thread_local std::string fallback_name;
      fallback_name = op_name(op);
      return fallback_name;
    }
    std::call_once(named_, [&] { name_ = op_name(op); });
    return name_;
  }

  const OpTraits& traits(const c10::OperatorHandle& op) {
    if (capture_ == Capture::fallback) return op_traits(op.schema().name());
    const OpTraits* t = traits_.load(std::memory_order_acquire);
    if (t == nullptr) {
      t = &op_traits(op.schema().name());
      traits_.store(t, std::memory_order_release);
    }
    return *t;
  }

  // Whether the schema has a Tensor[] or Tensor?[] argument (found once): only those can come
  // as the JIT's typed lists.
  bool takes_tensor_lists(const c10::OperatorHandle& op) {
    std::call_once(listed_, [&] {
      for (const auto& a : op.schema().arguments()) {
        const c10::TypePtr& type = a.real_type();
        if (type->kind() != c10::TypeKind::ListType) continue;
        const c10::TypePtr& element = type->castRaw<c10::ListType>()->getElementType();
        const bool optional = element->kind() == c10::TypeKind::OptionalType;
        const c10::TypePtr& inner =
            optional ? element->castRaw<c10::OptionalType>()->getElementType() : element;
        if (inner->kind() == c10::TypeKind::TensorType) tensor_lists_ = true;
      }
    });
    return tensor_lists_;
  }

  const CallChecks& checks(const c10::OperatorHandle& op) {
    std::call_once(checked_, [&] { checks_ = call_checks_of(op, capture_, cpu_kernel_later_); });
    return checks_;
  }

  c10::KernelFunction kernel_;
  Capture capture_;
  bool cpu_kernel_later_;
  std::once_flag checked_;
  CallChecks checks_;                                 // call_checks_of(op), found once
  std::atomic<std::atomic<int64_t>*> slot_{nullptr};  // this op's counter, found once
  std::atomic<const OpTraits*> traits_{nullptr};      // this op's traits, found once
  std::once_flag listed_;
  bool tensor_lists_ = false;                         // takes_tensor_lists(op), found once
  std::once_flag named_;
  std::string name_;                                  // op_name(op), found once
};

// m.impl("mm.out", entry(TORCH_FN(mm_out), Capture::results_are_arguments))
template <class FuncPtr>
torch::CppFunction entry(FuncPtr f, Capture capture) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<EntryKernel>(
      c10::KernelFunction::makeFromUnboxedFunction(f), capture));
}

// A view op's kernel (as_strided, view, ...): it makes metadata and neither reads nor writes
// device memory, so there is nothing for the entry to do (no eager mode records, orders or
// dry-runs a view; it has no call checks and calls no ops). It is registered unboxed, without
// the boxing of the arguments an entry() kernel takes (about 0.4 us of a view's 1.3), and is
// counted like every op under `name`, its op_name().
// m.impl("view", view_entry(&view, "aten::view"))
template <class R, class... Args>
torch::CppFunction view_entry(R (*kernel)(Args...), const char* name) {
  std::atomic<int64_t>* slot = &runtime::metrics::slot(runtime::metrics::Category::op, name);
  return torch::CppFunction([kernel, slot](Args... args) -> R {
    slot->fetch_add(1, std::memory_order_relaxed);
    return kernel(std::forward<Args>(args)...);
  });
}

// The same for a boxed kernel functor (a c10::OperatorKernel with state of its own).
template <class Functor>
torch::CppFunction entry_functor(std::unique_ptr<Functor> functor, Capture capture) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<EntryKernel>(
      c10::KernelFunction::makeFromBoxedFunctor(std::move(functor)), capture,
      /*cpu_kernel_later=*/true));
}

// The same for a boxed kernel function.
template <auto* boxed>
torch::CppFunction entry_boxed(Capture capture) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<EntryKernel>(
      c10::KernelFunction::makeFromBoxedFunction<boxed>(), capture));
}

}  // namespace torchtpu::aten
