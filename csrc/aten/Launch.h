#pragma once
// How a kernel's device work is run, by eager mode (runtime/Mode.h).
//
// A kernel validates its inputs and sizes its outputs on the calling thread, then hands the
// work that reads or writes device memory to launch(). In strict mode the work is enqueued on
// the current stream of the device and the host returns at once; the lambda owns references to
// the tensors it touches, so their memory stays alive until it has run. In debug mode it runs
// now, and with TORCHTPU_CHECK_NANS=1 its floating-point results are checked.
//
// Host code that must see device memory as it is after all queued work (host reads, the CPU
// fallback, data-dependent shapes, random ops, kernels that return new tensors computed on the
// host) calls wait_for_device() first, then works inline.
#include "runtime/HostPolicy.h"

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <functional>
#include <optional>
#include <tuple>
#include <string>
#include <string_view>
#include <vector>

namespace torchtpu::aten {

// `parallel`: the work runs parallel host loops (runtime::StreamQueue::enqueue); then
// kParallelElements or more elements, or a product of kParallelMacs or more multiply-adds.
void launch(c10::Device device, std::string op, std::function<void()> work,
            std::vector<at::Tensor> results = {}, bool parallel = false);
// Runs `work` now on this thread, as launch() would run it at once (strict eager, the current
// stream idle, this thread one that runs such work itself: runtime::StreamQueue::
// run_here_if_idle), with no closure to build; false, having run nothing, otherwise (or when
// the work would need wrapping: profiler tracing, NaN checks), and the caller launches it.
bool launch_here_if_idle(c10::Device device, const std::string& op,
                         c10::function_ref<void()> work, bool parallel);
// (What counts as parallel work is the host-execution policy's: runtime/HostPolicy.h.)
using runtime::host_policy::kParallelElements;
using runtime::host_policy::kParallelMacs;

// While one is alive on this thread, device work launched is named with `note` appended (fused
// eager appends the Python line where the op was recorded, for errors reported later).
class LaunchNote {
 public:
  explicit LaunchNote(std::string note);
  ~LaunchNote();
  LaunchNote(const LaunchNote&) = delete;
  LaunchNote& operator=(const LaunchNote&) = delete;

 private:
  std::string previous_;
};

// Waits until every stream of `device` has run what was enqueued so far (rethrowing a queued
// error, which names its op).
void wait_for_device(c10::Device device);

// In debug mode with NaN checks on: raises if a floating-point result of `op` holds NaN or Inf.
void check_results(const std::string& op, const std::vector<at::Tensor>& results);

// While one is alive on this thread, a kernel that computes its new result in host memory (a
// convolution) returns it there, as a TPU tensor over host memory outside HBM, instead of
// copying it into HBM. DeferAndFuse uses it when a fused region's leading convolution feeds only
// the region's epilogue: the result is then the region's output tiles, as a matmul's is.
class ResultInHostMemory {
 public:
  ResultInHostMemory();
  ~ResultInHostMemory();
  ResultInHostMemory(const ResultInHostMemory&) = delete;
  ResultInHostMemory& operator=(const ResultInHostMemory&) = delete;
  static bool active();

 private:
  bool previous_;
};

// native_dropout(input, p, train) in training on a floating-point input with 0 < p < 1, as the
// ops the CPU kernel runs: a mask drawn by bernoulli_ from the device generator into a tensor laid
// out like the input, output = input * (mask * (1 / (1 - p))), mask as bool. The strict and debug
// kernel runs it inside the kernel; fused eager records the same ops, so every mode draws the same
// numbers from the same generator. nullopt when the arguments are not that case.
std::optional<std::tuple<at::Tensor, at::Tensor>> dropout_on_device(const at::Tensor& input,
                                                                     double p,
                                                                     std::optional<bool> train);

}  // namespace torchtpu::aten
