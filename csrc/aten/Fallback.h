#pragma once
// What happens to an aten op that has no native TPU kernel.

#include <ATen/core/Generator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu::aten {

enum class FallbackMode {
  warn,    // run it on the CPU, count it, warn once per op (default)
  error,   // raise NotImplementedError naming the op
  silent,  // run it on the CPU and count it, without the warning
};

// Initially from TORCHTPU_FALLBACK ("warn", "error", "silent").
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);

// The bookkeeping of one op run on the host for want of a TPU kernel: raises in error mode,
// otherwise counts it in torchtpu.metrics and warns once per name in warn mode. The boxed
// fallback calls it, and so do native kernels that hand a case the TPU does not support (say,
// a float64 matmul) to the host. `why` replaces the standard explanation in the warning.
void note_fallback(const std::string& name, const char* why = nullptr);

// The fallback for ops on quantized (and other non-strided) tpu tensors: the op runs through the
// whole dispatcher on CPU copies of its tpu tensors (Fallback.cpp).
void layout_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Registers layout_fallback under `tpu_key` for every op the CPU has a `cpu_key` kernel for and
// torchtpu has none (call it after torchtpu's own registrations for the key).
void route_to_layout_fallback(c10::DispatchKey cpu_key, c10::DispatchKey tpu_key);


// The device an op runs on, from its arguments on the stack, with CUDA's rule: all tensors on
// one device except 0-dim CPU tensors read as scalars (never one the op writes: an out= tensor
// on the CPU is refused); a mismatch raises CUDA's error. Without TPU tensors, a TPU `device`
// argument; else nullopt.
std::optional<c10::Device> common_device(const std::string& name,
                                         c10::ArrayRef<c10::IValue> args,
                                         const c10::FunctionSchema& schema);

// Random ops on the host: for the lifetime of the loan, every Generator argument of the op on
// the stack (the TPU generator given, or the device's default when none is) is replaced by a
// CPU generator carrying its state; the advanced state is written back when the loan ends.
class GeneratorLoan {
 public:
  GeneratorLoan(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                std::optional<c10::Device> device);
  ~GeneratorLoan();
  GeneratorLoan(const GeneratorLoan&) = delete;
  GeneratorLoan& operator=(const GeneratorLoan&) = delete;

 private:
  std::vector<std::pair<at::Generator, at::Generator>> lent_;  // (device generator, host copy)
};

}  // namespace torchtpu::aten
