#pragma once
// Dry runs (docs/insight.md, "Dry runs"): while runtime::dry_run() is on, tensors on the device
// carry sizes, strides and dtypes but no values (the allocator hands out dry blocks: addresses
// counted against the simulated HBM, with no host memory behind them), and every op that enters
// a torchtpu kernel is handled here instead of running:
//  - views and factories run their kernels (they touch no device memory);
//  - every other op computes its results' metadata with its meta kernel, gets dry memory for
//    new results (so memory statistics and out-of-memory errors are those of the chip), and is
//    charged to the cost model through the same estimates its kernel charges;
//  - reading values (a copy to the host, .item(), printing) and ops whose result shapes depend
//    on values raise an error that names the dry run.
#include "aten/OpTraits.h"
#include "sim/CostModel.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <vector>

namespace torchtpu::aten {

enum class Capture;

// Handles `op` in a dry run; false when its kernel should run (views, factories).
bool dry_run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
                const OpTraits& traits, const std::string& name);

// The op's results computed by its meta kernel from meta copies of its TPU arguments (CPU
// tensors stay as they are); nullopt, with the reason in *why, when it has no usable meta
// kernel or returns something other than tensors. (DeferAndFuse sizes the results of the ops it
// records with it too.)
// With `constants`, integer returns (the sizes some attention ops return) are allowed: an
// undefined tensor holds their place in the results and (position, value) goes to *constants.
std::optional<std::vector<at::Tensor>> meta_results(
    const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::string* why,
    std::vector<std::pair<size_t, c10::IValue>>* constants = nullptr);

// The estimates kernels charge, for a dry run to charge the same:
// a matmul-unit op (mm, bmm, addmm, baddbmm, addmv, dot, _int_mm, convolutions) by name, from its
// arguments and results; nullopt for another op.
std::optional<sim::Estimate> estimate_mxu_op(const std::string& name,
                                             c10::ArrayRef<c10::IValue> args,
                                             const std::vector<at::Tensor>& results);
// a random op with a charge of its own (multinomial: aten/Random.cpp) from its arguments and
// results; nullopt for another op (the random fills are charged as one pass of "aten::random").
std::optional<sim::Estimate> estimate_random_op(const std::string& name,
                                                c10::ArrayRef<c10::IValue> args,
                                                const std::vector<at::Tensor>& results);
// The results of the fused attention ops (aten/Matmul.cpp) as meta tensors laid out as their
// kernels lay them out, and their integer results in *constants (as meta_results gives them),
// without PyTorch's Python meta kernels; nullopt for another op.
std::optional<std::vector<at::Tensor>> attention_meta_results(
    const std::string& name, c10::ArrayRef<c10::IValue> args,
    std::vector<std::pair<size_t, c10::IValue>>* constants);
// A VPU op over these TPU tensors (its arguments and results), as the host executor charges it;
// `elements`, when positive, replaces the elements of its largest tensor (a foreach op's).
void charge_vpu_op(const std::string& name, const OpTraits& traits,
                   const std::vector<at::Tensor>& tensors, int64_t elements = 0);
// A foreach op is one launch over its lists: its elements are those of its largest list of TPU
// tensors (its per-tensor ops' elements summed), not those of its largest tensor.
int64_t foreach_elements(c10::ArrayRef<c10::IValue> args);
// An op run through the host fallback, priced as if native (flagged): one VPU launch over its
// tensors at one unit per vreg.
sim::Estimate estimate_fallback_op(const std::vector<at::Tensor>& tensors);
// A copy or cast on one device (the VPU pass _copy_from charges).
void charge_device_copy(const at::Tensor& dst, const at::Tensor& src);

// Raises the error of reading `t` when it has no values (a dry run's tensor); `what` says what
// the read is.
void check_has_values(const at::Tensor& t, const char* what);

// A meta tensor with the geometry of a TPU tensor (other tensors are returned as they are).
at::Tensor to_meta(const at::Tensor& t);
// Runs the op's meta kernel on `meta` (its arguments, TPU tensors already made meta), leaving its
// returns there.
void call_meta(const c10::OperatorHandle& op, torch::jit::Stack& meta);

}  // namespace torchtpu::aten
