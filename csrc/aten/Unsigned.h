#pragma once
// uint16, uint32 and uint64 on the VPU (docs/simulated-chip.md, "Unsigned integers"). PyTorch's
// CPU kernels lack most ops on these three types (its "barebones" unsigned types); the TPU
// computes them. Where the CPU kernel an op runs on the host lacks the type, the host executor
// runs the op in int64 (unsigned operands zero-extended, uint64 ones taken bit for bit) and
// narrows the results to the types PyTorch's rules give them (its meta kernel's), modulo 2^n:
// one policy for every op of the host executor (aten/HostExecution.cpp) and for arange.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace torchtpu::aten {

// uint16, uint32, uint64.
inline bool is_wide_unsigned(c10::ScalarType t) {
  return t == c10::kUInt16 || t == c10::kUInt32 || t == c10::kUInt64;
}

// Whether a tensor among stack[base, base + num_args) or a dtype argument is one of them.
bool has_unsigned_operand(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          size_t base, size_t num_args);

// Whether calls of `op` with these argument dtypes are known to run PyTorch's CPU kernel as they
// are (false: known to need int64, or not tried yet). A call that is not is run at once, on the
// calling thread (aten/CallChecks.cpp), never queued or recorded into a fused region.
bool unsigned_runs_natively(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                            size_t base, size_t num_args);

// Whether the op entering now on this thread was made to run at once by the check above
// (aten/CallChecks.cpp): fused eager labels the materialization so, and a capture folds or fails.
bool unsigned_at_once();
void set_unsigned_at_once(bool at_once);

// Runs the op's CPU kernel on `stack` (its arguments last; TPU tensors already host aliases):
// as it is where the kernel has the types, else in int64 and narrowed (counted
// "vpu.widened_to_int64.<op>"). Raises NotImplementedError naming the op and type where the
// int64 run cannot be made exact (uint64 values of 2^63 or more in an op that orders or divides
// values) or fails.
void run_unsigned_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          const std::string& name);

// The type a factory kernel computes `type`'s values in on the host: int64 for the unsigned
// types whose CPU kernel `op` lacks (counted "vpu.widened_to_int64.<op>"), else `type`.
c10::ScalarType host_factory_type(c10::ScalarType type, const char* op);

}  // namespace torchtpu::aten
