// Convolutions on the simulated MXU: forward and backward, 1-, 2- and 3-d, grouped, strided,
// dilated, transposed, through PyTorch's *_overrideable entry points.
#include "aten/DryRun.h"
#include "aten/Products.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "sim/Mxu.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/ops/constant_pad_nd.h>
#include <c10/util/strides.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <ATen/SDPBackend.h>
#include "pytorch/Internals.h"
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/_scaled_mm.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmv.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/vdot.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

// Convolution. PyTorch routes a new backend's convolutions to the *_overrideable entry points.
// A convolution is bilinear in (input, weight), so it follows the MXU numerics as a matmul does
// (sim::bilinear_passes): PyTorch's host convolution runs on bf16 parts of the operands, with
// exact products and fp32 accumulation, the passes grouped into fewer host convolutions. The cost is charged as the im2col
// matmul the TPU runs: M = batch x output positions, K = input channels per group x kernel
// positions, N = output channels per group, one matmul per group.

int64_t prod(c10::IntArrayRef xs) {
  int64_t p = 1;
  for (auto x : xs) p *= x;
  return p;
}

sim::Estimate conv_estimate(const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& output, bool transposed, int64_t groups) {
  // For a transposed convolution the roles of input and output positions swap.
  const at::Tensor& positions = transposed ? input : output;
  const int64_t M = positions.size(0) * prod(positions.sizes().slice(2));
  const int64_t kernel = prod(weight.sizes().slice(2));
  const int64_t K = transposed ? weight.size(0) / groups : weight.size(1) * kernel;
  const int64_t N = transposed ? weight.size(1) * kernel : weight.size(0) / groups;
  const int bytes = static_cast<int>(input.element_size());
  const double hbm = sim::CostModel::padded_bytes(input.sizes(), bytes) +
                     sim::CostModel::padded_bytes(weight.sizes(), bytes) +
                     sim::CostModel::padded_bytes(output.sizes(), bytes);
  return sim::matmul_estimate(groups, M, K, N, input.scalar_type(), hbm);
}

}  // namespace

// The charge of a convolution (with its bias added in the same launch).
sim::Estimate estimate_convolution(const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor& bias, const at::Tensor& output,
                                   bool transposed, int64_t groups) {
  auto e = conv_estimate(input, weight, output, transposed, groups);
  if (bias.defined()) add_epilogue(e, output, bias);
  return e;
}

// The charge of a convolution's backward: each gradient asked for is one convolution-sized
// matmul.
sim::Estimate estimate_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& weight, bool transposed,
                                            int64_t groups, std::array<bool, 3> output_mask) {
  sim::Estimate e;
  const auto one = conv_estimate(input, weight, grad_output, transposed, groups);
  for (int i = 0; i < 2; ++i) {
    if (output_mask[i]) e += one;
  }
  return e;
}

namespace {

// A TPU tensor over the memory of host result `out` (taken over when `out` owns it alone).
at::Tensor in_host_memory(at::Tensor out, c10::Device device) {
  if (!out.is_contiguous() || out.storage_offset() != 0 || out.storage().use_count() != 1) {
    out = out.clone(at::MemoryFormat::Contiguous);  // one copy, owned alone
  }
  c10::StorageImpl* from = out.storage().unsafeGetStorageImpl();
  const size_t nbytes = from->nbytes();
  c10::DataPtr data = from->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
  data.unsafe_set_device(device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr,
                       /*resizable=*/false);
  auto result = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), out.dtype());
  result.unsafeGetTensorImpl()->set_sizes_contiguous(out.sizes());
  return result;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::IntArrayRef stride, c10::IntArrayRef padding,
                                    c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  wait_for_device(input.device());
  static const std::string kName = "aten::convolution_overrideable";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  const at::Tensor* b = bias.has_value() ? &*bias : nullptr;
  check_same_device("aten::convolution", {&input, &weight, b});
  std::optional<at::Tensor> h_bias;
  if (b != nullptr && b->defined()) h_bias = host_alias(*b);
  auto conv = [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bb) {
    return at::convolution(x, w, bb, stride, padding, dilation, transposed, output_padding, groups);
  };
  const at::Tensor x = host_alias(input), w = host_alias(weight);
  const auto dtype = input.scalar_type();
  at::Tensor out;
  if (dtype == at::kFloat || dtype == at::kHalf) {
    const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat);
    out = sim::bilinear_passes(xf, wf, sim::current_precision(),
                               [&](const at::Tensor& xp, const at::Tensor& wp) {
                                 return conv(xp, wp, std::nullopt);
                               });
    if (h_bias) {  // the bias is added on the VPU, in fp32, broadcast over channels
      std::vector<int64_t> shape(out.dim(), 1);
      shape[1] = out.size(1);
      out.add_(h_bias->to(at::kFloat).view(shape));
    }
    if (dtype == at::kHalf) out = out.to(at::kHalf);
  } else {
    // (Integers: int8 passes on the MXU, exact modulo 2^bits as the CPU's result: sim/Mxu.h.)
    if (dtype != at::kBFloat16 && sim::int8_limbs(dtype) == 0) {
      note_fallback("aten::convolution (" + std::string(c10::toString(dtype)) + ")",
                    "uses a dtype the MXU does not take; it runs on the host, in place on the "
                    "device memory.");
    }
    out = conv(x, w, h_bias);  // bf16: PyTorch's bf16 convolution accumulates in fp32
  }
  at::Tensor result = ResultInHostMemory::active() ? in_host_memory(out, input.device())
                                                  : on_device(out, input.device());
  sim::record("aten::convolution",
              estimate_convolution(input, weight, b ? *b : at::Tensor(), result, transposed, groups));
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  wait_for_device(input.device());
  static const std::string kName = "aten::convolution_backward_overrideable";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  check_same_device("aten::convolution_backward", {&grad_output, &input, &weight});
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto backward = [&](const at::Tensor& go, const at::Tensor& x, const at::Tensor& w,
                      std::array<bool, 3> mask) {
    return at::convolution_backward(go, x, w, bias_sizes, stride, padding, dilation, transposed,
                                    output_padding, groups, mask);
  };
  const at::Tensor go = host_alias(grad_output), x = host_alias(input), w = host_alias(weight);
  const auto dtype = input.scalar_type();
  at::Tensor gi, gw, gb;
  if (dtype == at::kFloat || dtype == at::kHalf) {
    // grad_input is bilinear in (grad_output, weight), grad_weight in (input, grad_output): one
    // call with (go part g, x part o, w part o) gives the pass (g, o) of both, so the passes of
    // sim::grouped_passes (grad_output's part first) take one call each, combined in their
    // order as the forward's (sim::bilinear_passes).
    const at::Tensor gof = go.to(at::kFloat), xf = x.to(at::kFloat), wf = w.to(at::kFloat);
    const auto p = sim::current_precision();
    std::array<bool, 3> products{output_mask[0], output_mask[1], false};
    if (sim::host_float32(p)) {
      std::tie(gi, gw, std::ignore) = backward(gof, xf, wf, products);
    } else if (p == sim::Precision::kDefault) {
      std::tie(gi, gw, std::ignore) =
          backward(sim::bf16_hi(gof), sim::bf16_hi(xf), sim::bf16_hi(wf), products);
    } else {
      std::vector<at::Tensor> gis, gws;
      for (const sim::PartPair& pair : sim::grouped_passes(p)) {
        auto [gi_p, gw_p, unused] = backward(sim::bf16_part(gof, pair.a),
                                             sim::bf16_part(xf, pair.b),
                                             sim::bf16_part(wf, pair.b), products);
        if (output_mask[0]) gis.push_back(gi_p);
        if (output_mask[1]) gws.push_back(gw_p);
      }
      if (output_mask[0]) gi = sim::combine_partials(gis);
      if (output_mask[1]) gw = sim::combine_partials(gws);
    }
    if (output_mask[2]) {  // a reduction on the VPU, in fp32
      std::vector<int64_t> dims{0};
      for (int64_t d = 2; d < gof.dim(); ++d) dims.push_back(d);
      // Summed over a dense copy of a strided grad_output: the sum's order, hence its rounding,
      // is then the one of a dense grad_output (as on the CPU, whose kernels read grad_output
      // dense), not one of the strides.
      gb = gof.contiguous(gof.suggest_memory_format()).sum(dims);
    }
    if (dtype == at::kHalf) {
      for (auto* t : {&gi, &gw, &gb}) {
        if (t->defined()) *t = t->to(at::kHalf);
      }
    }
  } else {
    // (Integers: int8 passes on the MXU, exact modulo 2^bits as the CPU's result: sim/Mxu.h.)
    if (dtype != at::kBFloat16 && sim::int8_limbs(dtype) == 0) {
      note_fallback("aten::convolution_backward (" + std::string(c10::toString(dtype)) + ")",
                    "uses a dtype the MXU does not take; it runs on the host, in place on the "
                    "device memory.");
    }
    std::tie(gi, gw, gb) = backward(go, x, w, output_mask);
  }
  const auto device = input.device();
  std::tuple<at::Tensor, at::Tensor, at::Tensor> result{on_device(gi, device), on_device(gw, device),
                                                        on_device(gb, device)};
  const sim::Estimate e =
      estimate_convolution_backward(grad_output, input, weight, transposed, groups, output_mask);
  if (e.launches > 0) sim::record("aten::convolution_backward", e);
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable",
         entry(TORCH_FN(convolution_overrideable), Capture::new_results));
  m.impl("convolution_backward_overrideable",
         entry(TORCH_FN(convolution_backward_overrideable), Capture::new_results));
}

}  // namespace torchtpu::aten
