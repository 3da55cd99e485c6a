// Batch norm. native_batch_norm updates running_mean/running_var in place although its schema
// does not mark them as written, so the copying CPU fallback would lose the update. It runs on
// host aliases instead, which write the running statistics straight into device memory.
// (native_batch_norm, _native_batch_norm_legit, their out= overloads and the backward: one file,
// as they share the host-alias helpers and the inference statistics rule below.)
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"

#include <ATen/OpMathType.h>
#include "pytorch/Internals.h"
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

std::optional<at::Tensor> host_alias_opt(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return host_alias(*t);
}

const at::Tensor* ptr_of(const std::optional<at::Tensor>& t) {
  return t.has_value() ? &*t : nullptr;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  wait_for_device(input.device());
  check_same_device("aten::native_batch_norm", {&input, ptr_of(weight), ptr_of(bias),
                                                ptr_of(running_mean), ptr_of(running_var)});
  auto [out, save_mean, save_invstd] = at::native_batch_norm(
      host_alias(input), host_alias_opt(weight), host_alias_opt(bias),
      host_alias_opt(running_mean), host_alias_opt(running_var), training, momentum, eps);
  // In inference the CPU returns empty saved statistics, and every other device the running
  // mean and inverse standard deviation, per channel: PyTorch's meta function and decomposition
  // give those for any device but the CPU (so fake tensors and compiled graphs expect them).
  if (!training && running_mean.has_value() && running_mean->defined() &&
      running_var.has_value() && running_var->defined() && save_mean.numel() == 0) {
    const c10::ScalarType accumulate = at::toOpMathType(input.scalar_type());
    save_mean = host_alias(*running_mean).to(accumulate, /*non_blocking=*/false, /*copy=*/true);
    save_invstd = host_alias(*running_var).to(accumulate).add(eps).rsqrt();
  }
  const auto device = input.device();
  return {on_device(out, device), on_device(save_mean, device), on_device(save_invstd, device)};
}

// The running-statistics overload is native_batch_norm under another name (the CPU fallback
// would give it the CPU's empty saved statistics in inference).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps) {
  return (native_batch_norm)(input, weight, bias, std::optional<at::Tensor>(running_mean),
                             std::optional<at::Tensor>(running_var), training, momentum, eps);
}

// The out= overloads: the same results (the per-channel statistics in inference included), into
// the given tensors, resized as the CPU resizes out= tensors.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_into(
    std::tuple<at::Tensor, at::Tensor, at::Tensor> results, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  at::Tensor* outs[] = {&out, &save_mean, &save_invstd};
  const at::Tensor* values[] = {&std::get<0>(results), &std::get<1>(results),
                                &std::get<2>(results)};
  for (int i = 0; i < 3; ++i) {
    TORCH_CHECK(outs[i]->scalar_type() == values[i]->scalar_type(),
                "Expected out tensor to have dtype ", values[i]->dtype(), ", but got ",
                outs[i]->dtype(), " instead");
    at::native::resize_output(*outs[i], values[i]->sizes());
    outs[i]->copy_(*values[i]);
  }
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
    at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  check_same_device("aten::native_batch_norm", {&input, &out, &save_mean, &save_invstd});
  return batch_norm_into((native_batch_norm)(input, weight, bias, running_mean, running_var,
                                             training, momentum, eps),
                         out, save_mean, save_invstd);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  check_same_device("aten::_native_batch_norm_legit", {&input, &out, &save_mean, &save_invstd});
  return batch_norm_into(native_batch_norm_legit(input, weight, bias, running_mean, running_var,
                                                 training, momentum, eps),
                         out, save_mean, save_invstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask) {
  wait_for_device(input.device());
  check_same_device("aten::native_batch_norm_backward",
                    {&grad_out, &input, ptr_of(weight), ptr_of(running_mean),
                     ptr_of(running_var), ptr_of(save_mean), ptr_of(save_invstd)});
  auto [gi, gw, gb] = at::native_batch_norm_backward(
      host_alias(grad_out), host_alias(input), host_alias_opt(weight),
      host_alias_opt(running_mean), host_alias_opt(running_var), host_alias_opt(save_mean),
      host_alias_opt(save_invstd), train, eps, output_mask);
  const auto device = input.device();
  return {on_device(gi, device), on_device(gw, device), on_device(gb, device)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", entry(TORCH_FN(native_batch_norm), Capture::none));
  m.impl("_native_batch_norm_legit", entry(TORCH_FN(native_batch_norm_legit), Capture::none));
  m.impl("native_batch_norm.out", entry(TORCH_FN(native_batch_norm_out), Capture::none));
  m.impl("_native_batch_norm_legit.out",
         entry(TORCH_FN(native_batch_norm_legit_out), Capture::none));
  m.impl("native_batch_norm_backward", entry(TORCH_FN(native_batch_norm_backward), Capture::none));
}

}  // namespace torchtpu::aten
