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
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace torchtpu::aten {

void launch(c10::Device device, std::string op, std::function<void()> work,
            std::vector<at::Tensor> results = {});

// Waits until every stream of `device` has run what was enqueued so far (rethrowing a queued
// error, which names its op).
void wait_for_device(c10::Device device);

// In debug mode with NaN checks on: raises if a floating-point result of `op` holds NaN or Inf.
void check_results(const std::string& op, const std::vector<at::Tensor>& results);

// The cost model's VPU cycles per vreg of an op, by base name ("gelu"); 1 when not listed.
double vpu_units(std::string_view base_name);

}  // namespace torchtpu::aten
