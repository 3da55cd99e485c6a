// Quantized tensors on tpu (docs/quantized.md): affine quantized tensors (quint8, qint8, qint32;
// per tensor and per channel) live in HBM under PyTorch's QTensorImpl with the dispatch key
// QuantizedPrivateUse1, as CUDA's live under QuantizedCUDA.
//
// - Creation and metadata are PyTorch's device-generic implementations (new_qtensor takes the
//   PrivateUse1 allocator): _empty_affine_quantized, empty_quantized, views, q_scale, ...
// - Quantize and dequantize are PyTorch's own functions (their argument checks included); their
//   device work goes through PyTorch's quantize/dequantize dispatch stubs, registered here for
//   PrivateUse1: one VPU launch each, queued on the stream like any kernel.
// - int_repr, copies between quantized tensors (to and from the CPU too) and the int8 linear
//   (quantized::linear_prepack / linear / linear_relu / linear_dynamic) are torchtpu kernels.
//   The linear's integer products accumulate exactly in int32 on the MXU at the chip's int8 rate;
//   the rescale to the output's quantization (or to float, dynamic) is its VPU epilogue.
// - Every other op on a quantized tpu tensor runs on the CPU through the counted fallback
//   (Fallback.cpp registers it for QuantizedPrivateUse1 too).
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"

#include <ATen/core/Tensor.h>
#include "pytorch/Internals.h"
#include <ATen/ops/_choose_qparams_per_tensor.h>
#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_make_per_channel_quantized_tensor.h>
#include <ATen/ops/_make_per_tensor_quantized_tensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/dequantize_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/full.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_channel.h>
#include <ATen/ops/quantize_per_channel_native.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/quantize_per_tensor_dynamic_native.h>
#include <ATen/ops/quantize_per_tensor_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <map>
#include <mutex>

namespace torchtpu::aten {
namespace {

// A dense CPU tensor of the quantized tensor's integer type over the same bytes (quint8 ->
// uint8, qint8 -> int8, qint32 -> int32); works for CPU and tpu quantized tensors alike.
at::Tensor int_alias(const at::Tensor& q) {
  return at::from_blob(q.data_ptr(), q.sizes(), q.strides(),
                       at::TensorOptions().dtype(c10::toUnderlying(q.scalar_type())));
}

at::Tensor on_host(const at::Tensor& t) {
  return t.device().is_privateuseone() ? host_alias(t) : t;
}

// One VPU launch over `elements` reading and writing `bytes` of HBM (quantize, dequantize,
// int_repr, device copies).
void charge_pass(const char* op, const at::Tensor& a, const at::Tensor& b) {
  const double bytes =
      sim::CostModel::padded_bytes(a.sizes(), static_cast<int>(a.element_size())) +
      sim::CostModel::padded_bytes(b.sizes(), static_cast<int>(b.element_size()));
  sim::record(op, sim::cost_model().vector(a.numel(), 4.0, bytes));
}

// ---------------------------------------------------------------------------------------------
// PyTorch's quantize/dequantize dispatch stubs for PrivateUse1. The caller (PyTorch's
// quantize_tensor_* / dequantize_tensor_*) has checked the arguments and sized the result; the
// work is queued on the current stream, computed by PyTorch's CPU quantizer on host aliases.

void quantize_per_tensor_stub(const at::Tensor& r, at::Tensor& q, double scale, int64_t zp) {
  charge_pass("aten::quantize_per_tensor", r, q);
  const auto dtype = q.scalar_type();
  launch(q.device(), "aten::quantize_per_tensor",
         [h_r = host_alias(r), h_q = int_alias(q), scale, zp, dtype, keep = std::vector{r, q}] {
           h_q.copy_(at::quantize_per_tensor(h_r, scale, zp, dtype).int_repr());
         });
}

void dequantize_per_tensor_stub(const at::Tensor& q, at::Tensor& r, double scale, int64_t zp) {
  charge_pass("aten::dequantize", q, r);
  launch(r.device(), "aten::dequantize",
         [h_q = int_alias(q), h_r = host_alias(r), scale, zp, keep = std::vector{q, r}] {
           h_r.copy_(at::_make_per_tensor_quantized_tensor(h_q, scale, zp).dequantize());
         });
}

// (Per channel, affine or with float zero points: PyTorch picks the scheme from the zero
// points' dtype.)
void quantize_per_channel_stub(const at::Tensor& r, at::Tensor& q, const at::Tensor& scales,
                               const at::Tensor& zero_points, int64_t axis) {
  charge_pass("aten::quantize_per_channel", r, q);
  const auto dtype = q.scalar_type();
  launch(q.device(), "aten::quantize_per_channel",
         [h_r = host_alias(r), h_q = int_alias(q), s = on_host(scales), z = on_host(zero_points),
          axis, dtype, keep = std::vector{r, q, scales, zero_points}] {
           h_q.copy_(at::quantize_per_channel(h_r, s, z, axis, dtype).int_repr());
         });
}

void dequantize_per_channel_stub(const at::Tensor& q, at::Tensor& r, const at::Tensor& scales,
                                 const at::Tensor& zero_points, int64_t axis) {
  charge_pass("aten::dequantize", q, r);
  launch(r.device(), "aten::dequantize",
         [h_q = int_alias(q), h_r = host_alias(r), s = on_host(scales), z = on_host(zero_points),
          axis, keep = std::vector{q, r, scales, zero_points}] {
           h_r.copy_(at::_make_per_channel_quantized_tensor(h_q, s, z, axis).dequantize());
         });
}

// ---------------------------------------------------------------------------------------------
// Kernels

at::Tensor int_repr(const at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty(self.sizes(), self.options()
                                               .dtype(c10::toUnderlying(self.scalar_type()))
                                               .memory_format(self.suggest_memory_format()));
  charge_pass("aten::int_repr", self, out);
  launch(out.device(), "aten::int_repr",
         [src = int_alias(self), dst = host_alias(out), keep = std::vector{self, out}] {
           dst.copy_(src);
         });
  return out;
}

// A dense integer tensor made a quantized one (torch._make_per_tensor_quantized_tensor).
at::Tensor make_per_tensor_quantized(const at::Tensor& self, double scale, int64_t zero_point) {
  const auto qtype = self.scalar_type() == at::kByte   ? at::kQUInt8
                     : self.scalar_type() == at::kChar ? at::kQInt8
                     : self.scalar_type() == at::kInt  ? at::kQInt32
                                                       : at::ScalarType::Undefined;
  TORCH_CHECK(qtype != at::ScalarType::Undefined,
              "_make_per_tensor_quantized_tensor expects an uint8, int8 or int32 tensor, got ",
              self.scalar_type());
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::_empty_affine_quantized(self.sizes(), self.options().dtype(qtype), scale,
                                               zero_point, self.suggest_memory_format());
  charge_pass("aten::_make_per_tensor_quantized_tensor", self, out);
  launch(out.device(), "aten::_make_per_tensor_quantized_tensor",
         [src = host_alias(self), dst = int_alias(out), keep = std::vector{self, out}] {
           dst.copy_(src);
         });
  return out;
}

// The quantizer of `src` for a tensor on `device` (per-channel parameters moved there).
at::QuantizerPtr quantizer_on(const at::Tensor& src, c10::Device device) {
  if (src.qscheme() == at::kPerTensorAffine) {
    return at::make_per_tensor_affine_quantizer(src.q_scale(), src.q_zero_point(),
                                                src.scalar_type());
  }
  TORCH_CHECK(src.qscheme() == at::kPerChannelAffine ||
                  src.qscheme() == at::kPerChannelAffineFloatQParams,
              "tpu supports per-tensor and per-channel affine quantized tensors, not ",
              toString(src.qscheme()));
  return at::make_per_channel_affine_quantizer(src.q_per_channel_scales().to(device),
                                               src.q_per_channel_zero_points().to(device),
                                               src.q_per_channel_axis(), src.scalar_type());
}

// copy_ between quantized tensors, one or both on tpu: the destination takes the source's
// quantization (as on the CPU) and its integers.
at::Tensor copy_from_quantized(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.is_quantized() && dst.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use "
              "dequantize to get a float Tensor from a quantized Tensor");
  TORCH_CHECK(self.qscheme() == dst.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(self.scalar_type() == dst.scalar_type(), "Quantized Copy expects the same dtype, got ",
              self.scalar_type(), " and ", dst.scalar_type());
  TORCH_CHECK(self.sizes() == dst.sizes(), "Quantized Copy expects the same sizes, got ",
              self.sizes(), " and ", dst.sizes());
  at::set_quantizer_(dst, quantizer_on(self, dst.device()));
  const at::Tensor from = int_alias(self), to = int_alias(dst);
  if (self.device().is_privateuseone() && dst.device().is_privateuseone()) {
    charge_pass("aten::_copy_from", self, dst);
    launch(dst.device(), "aten::_copy_from",
           [from, to, keep = std::vector{self, dst}] { to.copy_(from); });
  } else {
    // To or from the host: after the device's queued work, as a blocking transfer.
    wait_for_device(self.device().is_privateuseone() ? self.device() : dst.device());
    to.copy_(from);
  }
  return dst;
}

at::Tensor& copy_from_and_resize_quantized(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    at::native::quantized_resize_cpu_(dst, self.sizes(), std::nullopt);
  }
  copy_from_quantized(self, dst, false);
  return const_cast<at::Tensor&>(dst);
}

// ---------------------------------------------------------------------------------------------
// The int8 linear: quantized::linear_prepack on a tpu weight keeps the weight and bias on tpu;
// quantized::linear (quantized input and output), linear_relu and linear_dynamic (float input,
// quantized on the fly per tensor, float output) run it. One launch: the MXU's int8 matmul of
// the integers less their zero points, accumulated exactly in int32, and the epilogue that scales
// by input scale x weight scale, adds the bias and requantizes (or not, dynamic).

struct PackedLinearWeight final : LinearPackedParamsBase {
  PackedLinearWeight(at::Tensor w, std::optional<at::Tensor> b)
      : weight(std::move(w)), bias_(std::move(b)) {}

  at::Tensor apply(at::Tensor input, double scale, int64_t zero_point) override {
    return run(input, scale, zero_point, false);
  }
  at::Tensor apply_relu(at::Tensor input, double scale, int64_t zero_point) override {
    return run(input, scale, zero_point, true);
  }
  at::Tensor apply_dynamic(at::Tensor input, bool reduce_range) override {
    return run_dynamic(input, reduce_range, false);
  }
  at::Tensor apply_dynamic_relu(at::Tensor input, bool reduce_range) override {
    return run_dynamic(input, reduce_range, true);
  }
  std::tuple<at::Tensor, std::optional<at::Tensor>> unpack() override { return {weight, bias_}; }
  std::optional<at::Tensor> bias() override { return bias_; }
  void set_bias(std::optional<at::Tensor> bias) override { bias_ = std::move(bias); }

  at::Tensor weight;  // qint8 [N, K] on tpu, per tensor or per output channel
  std::optional<at::Tensor> bias_;  // float [N] on tpu

 private:
  void check_input(const at::Tensor& input) const {
    TORCH_CHECK(input.device() == weight.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                weight.device(), " and ", input.device(),
                "! (in quantized::linear: the weight was packed on ", weight.device(), ")");
    TORCH_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1),
                "The number of rows in the packed weight (", weight.size(1),
                ") does not match the input's last dimension (",
                input.dim() >= 1 ? input.size(-1) : 0, ")");
  }

  std::vector<int64_t> out_sizes(const at::Tensor& input) const {
    std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
    sizes.back() = weight.size(0);
    return sizes;
  }

  // (inputs - zero point) @ (weights - zero points)^T: exact in float64 (|products| < 2^16,
  // sums far below 2^53), the int32 accumulator of the MXU. Then per output channel scales.
  static at::Tensor accumulate(const at::Tensor& x_ints, int64_t x_zero, const at::Tensor& w_ints,
                               const at::Tensor& w_zeros) {
    const int64_t K = x_ints.size(-1);
    const at::Tensor x = x_ints.reshape({-1, K}).to(at::kDouble).sub(static_cast<double>(x_zero));
    const at::Tensor w = w_ints.to(at::kDouble).sub(w_zeros.to(at::kDouble).unsqueeze(1));
    return x.matmul(w.t());  // [M, N]
  }

  // The weight's scales and zero points per output channel, on the host.
  std::pair<at::Tensor, at::Tensor> weight_params() const {
    if (weight.qscheme() == at::kPerTensorAffine) {
      const int64_t n = weight.size(0);
      return {at::full({n}, weight.q_scale(), at::TensorOptions().dtype(at::kDouble)),
              at::full({n}, weight.q_zero_point(), at::TensorOptions().dtype(at::kLong))};
    }
    return {on_host(weight.q_per_channel_scales()).to(at::kDouble),
            on_host(weight.q_per_channel_zero_points()).to(at::kLong)};
  }

  sim::Estimate estimate(const at::Tensor& input, const at::Tensor& out) const {
    const int64_t K = weight.size(1), N = weight.size(0), M = input.numel() / std::max<int64_t>(K, 1);
    const auto& model = sim::cost_model();
    const double hbm = sim::CostModel::padded_bytes({M, K}, 1) + sim::CostModel::padded_bytes({N, K}, 1) +
                       sim::CostModel::padded_bytes(out.sizes(), static_cast<int>(out.element_size()));
    return model.combine(model.matmul(1, M, K, N, 1, 1, hbm, sim::MxuRate::int8),
                         model.vector(out.numel(), 4.0, 0));
  }

  at::Tensor run(const at::Tensor& input, double out_scale, int64_t out_zero, bool relu) {
    check_input(input);
    TORCH_CHECK(input.is_quantized() && input.qscheme() == at::kPerTensorAffine &&
                    input.scalar_type() == at::kQUInt8,
                "quantized::linear on tpu expects a per-tensor quint8 input, got ",
                input.scalar_type());
    const c10::DeviceGuard guard(input.device());
    at::Tensor out = at::_empty_affine_quantized(out_sizes(input), input.options(), out_scale,
                                                 out_zero);
    const std::string op = relu ? "quantized::linear_relu" : "quantized::linear";
    sim::record(op, estimate(input, out));
    auto [w_scales, w_zeros] = weight_params();
    std::optional<at::Tensor> h_bias;
    if (bias_ && bias_->defined()) h_bias = on_host(*bias_);
    launch(out.device(), op,
           [x = int_alias(input), x_scale = input.q_scale(), x_zero = input.q_zero_point(),
            w = int_alias(weight), w_scales, w_zeros, h_bias, dst = int_alias(out), out_scale,
            out_zero, relu, keep = std::vector{input, weight, out}, b = bias_] {
             at::Tensor y = accumulate(x, x_zero, w, w_zeros).mul_(w_scales.mul(x_scale));
             if (h_bias) y.add_(h_bias->to(at::kDouble));
             at::Tensor q = y.div_(out_scale).round_().add_(static_cast<double>(out_zero));
             q.clamp_(relu ? static_cast<double>(out_zero) : 0.0, 255.0);
             dst.copy_(q.reshape(dst.sizes()));
           });
    return out;
  }

  at::Tensor run_dynamic(const at::Tensor& input, bool reduce_range, bool relu) {
    check_input(input);
    TORCH_CHECK(input.scalar_type() == at::kFloat,
                "quantized::linear_dynamic expects a float input, got ", input.scalar_type());
    const c10::DeviceGuard guard(input.device());
    at::Tensor out = at::empty(out_sizes(input), input.options());
    const std::string op = relu ? "quantized::linear_relu_dynamic" : "quantized::linear_dynamic";
    // The input's quantization (min and max, one VPU pass) and the quantized linear.
    sim::record(op, sim::cost_model().combine(
                        sim::cost_model().vector(input.numel(), 4.0,
                                                 sim::CostModel::padded_bytes(input.sizes(), 4)),
                        estimate(input, out)));
    auto [w_scales, w_zeros] = weight_params();
    std::optional<at::Tensor> h_bias;
    if (bias_ && bias_->defined()) h_bias = on_host(*bias_);
    launch(out.device(), op,
           [h_x = host_alias(input), w = int_alias(weight), w_scales, w_zeros, h_bias,
            h_out = host_alias(out), reduce_range, relu, keep = std::vector{input, weight, out},
            b = bias_] {
             // PyTorch's choice of the input's per-tensor parameters (as the CPU kernel makes).
             const auto [scale, zero] = at::_choose_qparams_per_tensor(h_x, reduce_range);
             const at::Tensor x = at::quantize_per_tensor(h_x.contiguous(), scale, zero,
                                                          at::kQUInt8).int_repr();
             at::Tensor y = accumulate(x, zero, w, w_zeros)
                                .mul_(w_scales.to(at::kFloat).mul(static_cast<float>(scale))
                                          .to(at::kDouble))
                                .to(at::kFloat);
             if (h_bias) y.add_(*h_bias);
             if (relu) y.clamp_min_(0);
             h_out.copy_(y.reshape(h_out.sizes()));
           });
    return out;
  }
};

c10::intrusive_ptr<LinearPackedParamsBase> linear_prepack(at::Tensor weight,
                                                          std::optional<at::Tensor> bias) {
  TORCH_CHECK(weight.dim() == 2, "The weight tensor for quantized::linear_prepack (fbgemm) should"
              " be 2-dimensional.");
  TORCH_CHECK(weight.scalar_type() == at::kQInt8,
              "quantized::linear_prepack on tpu expects a qint8 weight, got ",
              weight.scalar_type());
  TORCH_CHECK(weight.qscheme() == at::kPerTensorAffine ||
                  (weight.qscheme() == at::kPerChannelAffine && weight.q_per_channel_axis() == 0),
              "quantized::linear_prepack on tpu expects a weight quantized per tensor or per "
              "output channel (axis 0)");
  if (bias && bias->defined()) {
    TORCH_CHECK(bias->device() == weight.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                weight.device(), " and ", bias->device(), "! (in quantized::linear_prepack)");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0) &&
                    bias->scalar_type() == at::kFloat,
                "quantized::linear_prepack expects a float bias of size ", weight.size(0));
  }
  // Packing keeps a copy, as PyTorch's CPU engines do: later writes to the weight do not change it.
  return c10::make_intrusive<PackedLinearWeight>(weight.clone(),
                                                 bias && bias->defined()
                                                     ? std::optional<at::Tensor>(bias->clone())
                                                     : std::nullopt);
}

// A weight packed on the CPU (fbgemm's or onednn's format: what torch.ao's quantize_dynamic and
// convert make, whose modules keep their packed weights as CPU objects that Module.to() does not
// move) meets a tpu input: its weight and bias are unpacked and packed again on the input's
// device once, kept for as long as the CPU object lives, and counted
// ("quantized.cpu_packed_weights_moved" in torchtpu.metrics.counters()).
PackedLinearWeight& packed_on_tpu(const c10::intrusive_ptr<LinearPackedParamsBase>& packed,
                                  c10::Device device) {
  if (auto* p = dynamic_cast<PackedLinearWeight*>(packed.get())) return *p;
  struct Moved {
    c10::weak_intrusive_ptr<LinearPackedParamsBase> from;
    c10::intrusive_ptr<LinearPackedParamsBase> to;
  };
  static std::mutex mutex;
  static std::map<std::pair<const void*, c10::DeviceIndex>, Moved> moved;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = moved.begin(); it != moved.end();) {  // (forget the ones whose CPU object died)
    it = it->second.from.expired() ? moved.erase(it) : std::next(it);
  }
  const auto key = std::make_pair(static_cast<const void*>(packed.get()), device.index());
  auto it = moved.find(key);
  if (it == moved.end()) {
    auto [weight, bias] = packed->unpack();
    std::optional<at::Tensor> b;
    if (bias && bias->defined()) b = bias->to(device);
    it = moved.emplace(key, Moved{c10::weak_intrusive_ptr<LinearPackedParamsBase>(packed),
                                  linear_prepack(weight.to(device), b)}).first;
    runtime::metrics::count("quantized.cpu_packed_weights_moved");
  }
  return static_cast<PackedLinearWeight&>(*it->second.to);
}

at::Tensor linear(at::Tensor input, const c10::intrusive_ptr<LinearPackedParamsBase>& packed,
                  double scale, int64_t zero_point) {
  const c10::Device device = input.device();
  return packed_on_tpu(packed, device).apply(std::move(input), scale, zero_point);
}

at::Tensor linear_relu(at::Tensor input, const c10::intrusive_ptr<LinearPackedParamsBase>& packed,
                       double scale, int64_t zero_point) {
  const c10::Device device = input.device();
  return packed_on_tpu(packed, device).apply_relu(std::move(input), scale, zero_point);
}

at::Tensor linear_dynamic(at::Tensor input,
                          const c10::intrusive_ptr<LinearPackedParamsBase>& packed,
                          bool reduce_range) {
  const c10::Device device = input.device();
  return packed_on_tpu(packed, device).apply_dynamic(std::move(input), reduce_range);
}

at::Tensor linear_relu_dynamic(at::Tensor input,
                               const c10::intrusive_ptr<LinearPackedParamsBase>& packed,
                               bool reduce_range) {
  const c10::Device device = input.device();
  return packed_on_tpu(packed, device).apply_dynamic_relu(std::move(input), reduce_range);
}

}  // namespace

// Float input: quantize (and dequantize of a float tensor, which is a copy).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", entry(TORCH_FN(at::native::quantize_per_tensor), Capture::none));
  m.impl("quantize_per_tensor.tensor_qparams",
         entry(TORCH_FN(at::native::quantize_per_tensor_tensor_qparams), Capture::none));
  m.impl("quantize_per_channel", entry(TORCH_FN(at::native::quantize_per_channel), Capture::none));
  m.impl("quantize_per_tensor_dynamic",
         entry(TORCH_FN(at::native::quantize_per_tensor_dynamic), Capture::none));
  m.impl("dequantize.self", entry(TORCH_FN(at::native::dequantize_cpu_or_cuda), Capture::none));
  m.impl("_make_per_tensor_quantized_tensor",
         entry(TORCH_FN(make_per_tensor_quantized), Capture::none));
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized",
         entry(TORCH_FN(at::native::empty_affine_quantized), Capture::none));
  m.impl("_empty_per_channel_affine_quantized",
         entry(TORCH_FN(at::native::empty_per_channel_affine_quantized), Capture::none));
  m.impl("empty_quantized", entry(TORCH_FN(at::native::empty_quantized), Capture::none));
  m.impl("empty.memory_format", entry(TORCH_FN(at::native::empty_unknown_quantized), Capture::none));
  m.impl("empty_strided",
         entry(TORCH_FN(at::native::empty_strided_unknown_quantized), Capture::none));
  m.impl("empty_like", entry(TORCH_FN(at::native::empty_like_quantized), Capture::none));
  m.impl("as_strided", entry(TORCH_FN(at::native::as_strided_qtensorimpl), Capture::none));
  m.impl("view", entry(TORCH_FN(at::native::view), Capture::none));
  m.impl("_reshape_alias", entry(TORCH_FN(at::native::_reshape_alias), Capture::none));
  m.impl("unfold", entry(TORCH_FN(at::native::unfold), Capture::none));
  m.impl("squeeze", entry(TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(
                              at::native::squeeze_quantized)),
                          Capture::none));
  m.impl("squeeze.dim", entry(TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
                                  at::native::squeeze_quantized)),
                              Capture::none));
  m.impl("squeeze.dims",
         entry(TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(
                   at::native::squeeze_quantized)),
               Capture::none));
  m.impl("unsqueeze", entry(TORCH_FN(at::native::unsqueeze_quantized), Capture::none));
  m.impl("set_.source_Storage_storage_offset",
         entry(TORCH_FN(at::native::set_storage_quantized_), Capture::none));
  m.impl("q_scale", entry(TORCH_FN(at::native::q_scale_quant), Capture::none));
  m.impl("q_zero_point", entry(TORCH_FN(at::native::q_zero_point_quant), Capture::none));
  m.impl("q_per_channel_scales", entry(TORCH_FN(at::native::q_per_channel_scales), Capture::none));
  m.impl("q_per_channel_zero_points",
         entry(TORCH_FN(at::native::q_per_channel_zero_points), Capture::none));
  m.impl("q_per_channel_axis", entry(TORCH_FN(at::native::q_per_channel_axis), Capture::none));
  m.impl("qscheme", entry(TORCH_FN(at::native::qscheme_quant), Capture::none));
  m.impl("dequantize.self", entry(TORCH_FN(at::native::dequantize_quantized), Capture::none));
  m.impl("int_repr", entry(TORCH_FN(int_repr), Capture::none));
  m.impl("clone", entry(TORCH_FN(at::native::quantized_clone), Capture::none));
  m.impl("_copy_from", entry(TORCH_FN(copy_from_quantized), Capture::none));
  m.impl("_copy_from_and_resize", entry(TORCH_FN(copy_from_and_resize_quantized), Capture::none));
}

TORCH_LIBRARY_IMPL(quantized, QuantizedPrivateUse1, m) {
  m.impl("linear_prepack", entry(TORCH_FN(linear_prepack), Capture::none));
  m.impl("linear", entry(TORCH_FN(linear), Capture::none));
  m.impl("linear_relu", entry(TORCH_FN(linear_relu), Capture::none));
}

TORCH_LIBRARY_IMPL(quantized, PrivateUse1, m) {
  m.impl("linear_dynamic", entry(TORCH_FN(linear_dynamic), Capture::none));
  m.impl("linear_relu_dynamic", entry(TORCH_FN(linear_relu_dynamic), Capture::none));
}

// Every other op the CPU runs on quantized tensors runs on tpu through the fallback, as the CPU
// runs it (made after the registrations above: statics of one file are made in order).
const bool g_quantized_ops_routed = [] {
  route_to_layout_fallback(c10::DispatchKey::QuantizedCPU, c10::DispatchKey::QuantizedPrivateUse1);
  return true;
}();

}  // namespace torchtpu::aten

// (PyTorch's macro must be used inside its namespace.)
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_stub,
                              &torchtpu::aten::quantize_per_tensor_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_stub,
                              &torchtpu::aten::dequantize_per_tensor_stub)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_affine_stub,
                              &torchtpu::aten::quantize_per_channel_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_affine_stub,
                              &torchtpu::aten::dequantize_per_channel_stub)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_float_qparams_stub,
                              &torchtpu::aten::quantize_per_channel_stub)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_float_qparams_stub,
                              &torchtpu::aten::dequantize_per_channel_stub)
}  // namespace at::native
