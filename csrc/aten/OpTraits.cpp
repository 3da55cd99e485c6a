// The op-traits registry (OpTraits.h): PyTorch's tags, read from the dispatcher, and
// torchtpu's own facts, the table below.
#include "aten/OpTraits.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <deque>
#include <unordered_map>

namespace torchtpu::aten {

std::string_view op_key(std::string_view name) {
  if (name.substr(0, 6) == "aten::") name.remove_prefix(6);
  if (auto dot = name.find('.'); dot != std::string_view::npos) name = name.substr(0, dot);
  if (name.size() > 1 && name.back() == '_') name.remove_suffix(1);
  return name;
}

namespace {

// torchtpu's facts of an op (OR-ed into a row).
enum Fact : uint32_t {
  vpu = 1 << 0,                 // OpUnit::vpu: the VPU executor registers every CPU overload
  mxu = 1 << 1,                 // OpUnit::mxu
  matmul_leader = 1 << 2,       // FusionRole::matmul_leader
  reduction_epilogue = 1 << 3,  // FusionRole::reduction_epilogue
  at_once = 1 << 4,             // Sizing::value_dependent (beside PyTorch's dynamic_output_shape)
  sized_by_rule = 1 << 5,       // Sizing::rule
  like_input = 1 << 6,          // Sizing::like_input
  in_float32 = 1 << 7,          // computes_in_float32
  writes_only = 1 << 8,         // writes_without_reading
  divides_integers = 1 << 9,    // divides_integers
  cpu_indices = 1 << 10,        // takes_cpu_indices
  integer = 1 << 11,            // integer_operands
  contiguous = 1 << 12,         // contiguous_operands
};

using Fn = PointwiseFn;

struct Row {
  std::string_view key;
  uint32_t facts;
  double units = 1;
  Fn fn = Fn::none;
  constexpr Row(std::string_view k, uint32_t f, double u = 1, Fn p = Fn::none)
      : key(k), facts(f), units(u), fn(p) {}
  constexpr Row(std::string_view k, uint32_t f, Fn p) : key(k), facts(f), fn(p) {}
};

// One row per op key. Units: VPU cycles per (8 x 128) vreg, per element of the largest tensor of
// the op. These are assumptions of the model (no public per-op VPU figures exist): 1 for simple
// arithmetic, comparisons and data movement; 4 for transcendental functions (the EUP); more for
// ops that make several passes (normalizations, softmax, losses, sorting).
// at_once: the output shape depends on the values of the inputs, or the meta kernel sizes
// results differently from the CPU kernel (the margin losses give a 0-d input's unreduced loss
// the shape [1], the CPU kernels the shape []).
// contiguous: PyTorch 2.13's CPU native_group_norm_backward reads dY in the memory format of X:
// with one channels-last and one contiguous (as AOTAutograd's graphs pass them when a group norm
// follows an attention block's transposed output), every gradient is wrong (max error 12 on unit
// inputs). The VPU executor passes it contiguous operands. Regression test: test_compile.py.
// in_float32: PyTorch 2.13's CPU grid_sampler_2d for bfloat16 returns values up to 3e38 from an
// image in [0, 255] on OpInfo's 2x3x345x456 reference sample, and another result when its input
// is copied (it reads outside its input): the VPU executor runs these in float32 and rounds the
// results (which is also what the VPU does with reduced-precision element-wise work).
constexpr Row kTable[] = {
    // ---- the VPU executor (HostExecution.cpp) ----
    // arithmetic and math
    {"add", vpu, Fn::add}, {"sub", vpu, Fn::sub}, {"mul", vpu, Fn::mul},
    {"div", vpu | divides_integers, 2, Fn::div}, {"remainder", vpu | divides_integers},
    {"fmod", vpu | divides_integers}, {"neg", vpu, Fn::neg}, {"abs", vpu, Fn::abs}, {"sign", vpu},
    {"sgn", vpu}, {"reciprocal", vpu, 2}, {"pow", vpu, 4}, {"exp", vpu, 4}, {"exp2", vpu, 4},
    {"expm1", vpu, 4}, {"log", vpu, 4}, {"log2", vpu, 4}, {"log10", vpu, 4}, {"log1p", vpu, 4},
    {"sqrt", vpu, 4}, {"rsqrt", vpu, 4}, {"sin", vpu, 4}, {"cos", vpu, 4}, {"tan", vpu, 4},
    {"tanh", vpu, 4}, {"sigmoid", vpu, 4}, {"erf", vpu, 4}, {"erfc", vpu, 4}, {"erfinv", vpu, 4},
    {"floor", vpu}, {"ceil", vpu}, {"round", vpu}, {"trunc", vpu}, {"frac", vpu}, {"clamp", vpu},
    {"clamp_min", vpu, Fn::clamp_min}, {"clamp_max", vpu}, {"maximum", vpu, Fn::maximum},
    {"minimum", vpu, Fn::minimum}, {"fmax", vpu}, {"fmin", vpu}, {"where", vpu}, {"lerp", vpu, Fn::lerp},
    {"addcmul", vpu, Fn::addcmul}, {"addcdiv", vpu, Fn::addcdiv}, {"addr", vpu}, {"hypot", vpu}, {"atan2", vpu},
    {"floor_divide", vpu | divides_integers}, {"nan_to_num", vpu}, {"isnan", vpu}, {"isinf", vpu},
    {"isfinite", vpu}, {"isneginf", vpu}, {"isposinf", vpu}, {"logical_and", vpu},
    {"logical_or", vpu}, {"logical_xor", vpu}, {"logical_not", vpu}, {"bitwise_and", vpu},
    {"bitwise_or", vpu}, {"bitwise_xor", vpu}, {"bitwise_not", vpu}, {"eq", vpu}, {"ne", vpu},
    {"lt", vpu}, {"le", vpu}, {"gt", vpu}, {"ge", vpu}, {"masked_fill", vpu},
    // activations and their backward
    {"relu", vpu | like_input, Fn::relu}, {"gelu", vpu, 6}, {"gelu_backward", vpu, 8}, {"silu", vpu, 5},
    {"silu_backward", vpu, 6}, {"sigmoid_backward", vpu, 2}, {"tanh_backward", vpu, 2},
    {"threshold", vpu}, {"threshold_backward", vpu}, {"hardtanh", vpu}, {"hardtanh_backward", vpu},
    {"leaky_relu", vpu}, {"leaky_relu_backward", vpu}, {"elu", vpu, 4}, {"elu_backward", vpu},
    {"softplus", vpu, 6}, {"softplus_backward", vpu}, {"mish", vpu, 10}, {"mish_backward", vpu},
    {"hardswish", vpu}, {"hardswish_backward", vpu}, {"hardsigmoid", vpu},
    {"hardsigmoid_backward", vpu}, {"log_sigmoid_forward", vpu}, {"log_sigmoid_backward", vpu},
    // reductions and scans
    {"sum", vpu | reduction_epilogue}, {"mean", vpu | reduction_epilogue},
    {"prod", vpu | reduction_epilogue}, {"max", vpu}, {"min", vpu},
    {"amax", vpu | reduction_epilogue}, {"amin", vpu | reduction_epilogue}, {"argmax", vpu},
    {"argmin", vpu}, {"aminmax", vpu}, {"var", vpu, 3}, {"std", vpu, 5}, {"var_mean", vpu, 3},
    {"std_mean", vpu, 5}, {"norm", vpu, 3}, {"linalg_vector_norm", vpu, 3}, {"logsumexp", vpu, 5},
    {"cumsum", vpu, 2}, {"cumprod", vpu, 2}, {"any", vpu}, {"all", vpu}, {"count_nonzero", vpu},
    // softmax and normalization
    {"_softmax", vpu, 6}, {"_log_softmax", vpu, 6}, {"_softmax_backward_data", vpu, 3},
    {"_log_softmax_backward_data", vpu, 5}, {"native_layer_norm", vpu | sized_by_rule, 8},
    {"native_layer_norm_backward", vpu | sized_by_rule, 12}, {"native_group_norm", vpu, 8},
    {"native_group_norm_backward", vpu | contiguous, 12}, {"_fused_rms_norm", vpu, 6},
    {"_fused_rms_norm_backward", vpu},
    // embedding and indexing
    {"embedding_dense_backward", vpu | sized_by_rule}, {"index_select", vpu | sized_by_rule},
    {"index", vpu | cpu_indices}, {"_index_put_impl", vpu | cpu_indices},
    {"index_put", vpu | cpu_indices}, {"gather", vpu}, {"scatter", vpu}, {"scatter_add", vpu},
    {"scatter_reduce", vpu}, {"index_add", vpu}, {"index_copy", vpu}, {"index_fill", vpu},
    {"masked_select", vpu | at_once}, {"masked_scatter", vpu}, {"nonzero", vpu | at_once},
    {"take", vpu}, {"put", vpu}, {"isin", vpu},
    // (checked at the call, after the work it depends on, with the CPU's message: CUDA's kernel
    // asserts on the device and the error surfaces later; recorded, an op that writes nothing
    // would be eliminated as dead in fused eager)
    {"_assert_async", vpu | at_once},
    // (run at once: PyTorch's meta function sizes offset2bag and max_indices by mode and
    // per-sample weights where the CPU kernel sizes them otherwise)
    {"_embedding_bag", vpu | at_once, 2}, {"_embedding_bag_forward_only", vpu | at_once, 2},
    {"_embedding_bag_backward", vpu | at_once, 2},
    {"_embedding_bag_dense_backward", vpu | at_once, 2},
    {"_embedding_bag_per_sample_weights_backward", vpu | at_once, 2},
    // data movement
    {"cat", vpu}, {"flip", vpu}, {"roll", vpu}, {"tril", vpu}, {"triu", vpu},
    {"constant_pad_nd", vpu}, {"reflection_pad1d", vpu}, {"reflection_pad2d", vpu},
    {"replication_pad1d", vpu}, {"replication_pad2d", vpu}, {"repeat_interleave", vpu | at_once},
    {"sort", vpu, 12}, {"topk", vpu, 12}, {"unique_dim", vpu | at_once},
    {"_unique2", vpu | at_once}, {"clone", vpu},
    // pooling and resampling
    {"max_pool2d_with_indices", vpu}, {"max_pool2d_with_indices_backward", vpu},
    {"avg_pool2d", vpu}, {"avg_pool2d_backward", vpu}, {"_adaptive_avg_pool2d", vpu},
    {"_adaptive_avg_pool2d_backward", vpu}, {"upsample_nearest2d", vpu},
    {"upsample_nearest2d_backward", vpu}, {"upsample_bilinear2d", vpu},
    {"upsample_bilinear2d_backward", vpu}, {"_upsample_bilinear2d_aa", vpu},
    {"_upsample_bilinear2d_aa_backward", vpu}, {"upsample_nearest1d", vpu},
    {"upsample_nearest1d_backward", vpu}, {"upsample_linear1d", vpu},
    {"upsample_linear1d_backward", vpu}, {"upsample_bicubic2d", vpu},
    {"upsample_bicubic2d_backward", vpu}, {"upsample_nearest3d", vpu},
    {"upsample_nearest3d_backward", vpu}, {"upsample_trilinear3d", vpu},
    {"upsample_trilinear3d_backward", vpu}, {"_upsample_nearest_exact1d", vpu},
    {"_upsample_nearest_exact1d_backward", vpu}, {"_upsample_nearest_exact2d", vpu},
    {"_upsample_nearest_exact2d_backward", vpu}, {"grid_sampler_2d", vpu | in_float32},
    {"grid_sampler_2d_backward", vpu | in_float32}, {"grid_sampler_3d", vpu | in_float32},
    {"grid_sampler_3d_backward", vpu | in_float32}, {"im2col", vpu}, {"col2im", vpu},
    {"unfold_backward", vpu}, {"replication_pad1d_backward", vpu},
    {"replication_pad2d_backward", vpu},
    // gated linear units, weight norm, bucketing, complex from polar, identity matrices
    {"glu", vpu, 5}, {"glu_backward", vpu, 6}, {"_weight_norm_interface", vpu, 4},
    {"_weight_norm_interface_backward", vpu, 6}, {"bucketize", vpu, 8}, {"polar", vpu},
    {"eye", vpu},
    // small triangular solves (chunked linear-attention models solve 64 x 64 systems)
    {"linalg_solve_triangular", vpu, 16},
    // more element-wise math: inverse trigonometric and hyperbolic functions, special functions
    {"acos", vpu, 4}, {"asin", vpu, 4}, {"atan", vpu, 4}, {"acosh", vpu, 4}, {"asinh", vpu, 4},
    {"atanh", vpu, 4}, {"cosh", vpu, 4}, {"sinh", vpu, 4}, {"sinc", vpu, 5}, {"logit", vpu, 5},
    {"logit_backward", vpu, 2}, {"xlogy", vpu, 4}, {"special_xlog1py", vpu, 4},
    {"special_entr", vpu, 4}, {"copysign", vpu}, {"signbit", vpu}, {"heaviside", vpu},
    {"logaddexp", vpu, 8}, {"logaddexp2", vpu, 8}, {"lgamma", vpu, 8}, {"digamma", vpu, 8},
    {"polygamma", vpu, 16}, {"i0", vpu, 8}, {"special_i0e", vpu, 8}, {"special_i1", vpu, 8},
    {"special_i1e", vpu, 8}, {"special_erfcx", vpu, 8}, {"special_ndtri", vpu, 8},
    {"special_log_ndtr", vpu, 8}, {"special_zeta", vpu, 16}, {"nextafter", vpu},
    {"igamma", vpu, 16}, {"igammac", vpu, 16}, {"gcd", vpu, 8}, {"lcm", vpu, 8},
    {"bitwise_left_shift", vpu}, {"bitwise_right_shift", vpu},
    // (Python's << and >>: "__lshift__" keyed as op_key leaves it, and its in-place "__ilshift__".)
    {"__lshift_", vpu}, {"__rshift_", vpu}, {"__ilshift_", vpu}, {"__irshift_", vpu},
    {"softshrink", vpu},
    {"softshrink_backward", vpu}, {"hardshrink", vpu}, {"hardshrink_backward", vpu},
    {"conj_physical", vpu}, {"angle", vpu, 4}, {"complex", vpu}, {"frexp", vpu, 2},
    {"special_bessel_j0", vpu}, {"special_bessel_j1", vpu}, {"special_bessel_y0", vpu},
    {"special_bessel_y1", vpu}, {"special_modified_bessel_i0", vpu},
    {"special_modified_bessel_i1", vpu}, {"special_modified_bessel_k0", vpu},
    {"special_modified_bessel_k1", vpu}, {"special_scaled_modified_bessel_k0", vpu},
    {"special_scaled_modified_bessel_k1", vpu}, {"special_spherical_bessel_j0", vpu},
    {"special_airy_ai", vpu}, {"special_chebyshev_polynomial_t", vpu},
    {"special_chebyshev_polynomial_u", vpu}, {"special_chebyshev_polynomial_v", vpu},
    {"special_chebyshev_polynomial_w", vpu}, {"special_shifted_chebyshev_polynomial_t", vpu},
    {"special_shifted_chebyshev_polynomial_u", vpu},
    {"special_shifted_chebyshev_polynomial_v", vpu},
    {"special_shifted_chebyshev_polynomial_w", vpu}, {"special_hermite_polynomial_h", vpu},
    {"special_hermite_polynomial_he", vpu}, {"special_laguerre_polynomial_l", vpu},
    {"special_legendre_polynomial_p", vpu}, {"_prelu_kernel", vpu}, {"_prelu_kernel_backward", vpu},
    // more reductions, scans and order statistics
    {"nansum", vpu | sized_by_rule}, {"trace", vpu}, {"median", vpu, 12}, {"nanmedian", vpu, 12}, {"mode", vpu, 12},
    {"kthvalue", vpu, 12}, {"_cummax_helper", vpu}, {"_cummin_helper", vpu},
    {"_logcumsumexp", vpu, 8}, {"renorm", vpu, 3}, {"searchsorted", vpu, 8},
    {"unique_consecutive", vpu | at_once}, {"index_reduce", vpu},
    // evenly spaced values
    {"linspace", vpu}, {"logspace", vpu, 4},
    // more padding, pooling and resampling
    {"reflection_pad1d_backward", vpu}, {"reflection_pad2d_backward", vpu},
    {"reflection_pad3d", vpu}, {"reflection_pad3d_backward", vpu}, {"replication_pad3d", vpu},
    {"replication_pad3d_backward", vpu}, {"avg_pool3d", vpu}, {"avg_pool3d_backward", vpu},
    {"_adaptive_avg_pool3d", vpu}, {"_adaptive_avg_pool3d_backward", vpu},
    {"max_pool3d_with_indices", vpu}, {"max_pool3d_with_indices_backward", vpu},
    {"adaptive_max_pool2d", vpu}, {"adaptive_max_pool2d_backward", vpu},
    {"adaptive_max_pool3d", vpu}, {"adaptive_max_pool3d_backward", vpu}, {"max_unpool2d", vpu},
    {"max_unpool3d", vpu}, {"_upsample_nearest_exact3d", vpu},
    {"_upsample_nearest_exact3d_backward", vpu}, {"channel_shuffle", vpu},
    // margin losses
    {"multi_margin_loss", vpu | at_once, 4}, {"multi_margin_loss_backward", vpu, 4},
    {"multilabel_margin_loss_forward", vpu | at_once, 4},
    {"multilabel_margin_loss_backward", vpu, 4},
    // discrete Fourier transforms (XLA runs FFTs on the TPU's vector units)
    {"_fft_r2c", vpu, 16}, {"_fft_c2r", vpu, 16}, {"_fft_c2c", vpu, 16},
    // mixed precision: GradScaler's unscale-and-check and scale update
    {"_amp_foreach_non_finite_check_and_unscale", vpu}, {"_amp_update_scale", vpu},
    // dropout and losses
    {"native_dropout_backward", vpu}, {"nll_loss_forward", vpu, 2}, {"nll_loss_backward", vpu, 2},
    {"nll_loss2d_forward", vpu}, {"nll_loss2d_backward", vpu}, {"mse_loss", vpu | sized_by_rule, 3},
    {"mse_loss_backward", vpu | sized_by_rule, 3}, {"binary_cross_entropy", vpu, 10},
    {"binary_cross_entropy_backward", vpu, 6}, {"smooth_l1_loss", vpu},
    {"smooth_l1_loss_backward", vpu}, {"huber_loss", vpu}, {"huber_loss_backward", vpu},
    // optimizers and AMP
    {"_foreach_add", vpu}, {"_foreach_sub", vpu}, {"_foreach_mul", vpu}, {"_foreach_div", vpu, 2},
    {"_foreach_addcmul", vpu}, {"_foreach_addcdiv", vpu, 3}, {"_foreach_sqrt", vpu, 4},
    {"_foreach_neg", vpu}, {"_foreach_lerp", vpu, 3}, {"_foreach_maximum", vpu},
    {"_foreach_norm", vpu, 3}, {"_foreach_zero", vpu}, {"_foreach_copy", vpu},
    {"_foreach_pow", vpu}, {"_foreach_sign", vpu}, {"_foreach_abs", vpu},
    {"_foreach_clamp_min", vpu}, {"_foreach_clamp_max", vpu}, {"_foreach_exp", vpu},
    {"_fused_adam", vpu, 20}, {"_fused_adamw", vpu, 20}, {"_fused_sgd", vpu},
    // ---- kernels of their own (Kernels.cpp, Random.cpp, Recurrent.cpp) ----
    {"_copy_from", 0}, {"fill", writes_only}, {"zero", writes_only},
    {"random", 0, 4},  // the random fills (normal_, uniform_, bernoulli_, ...) are charged as this
    // (a draw, a division and an argmax per category: Random.cpp's multinomial_estimate)
    {"multinomial", 0, 7},
    {"histc", 0, 2}, {"_thnn_fused_gru_cell", 0, 3}, {"_thnn_fused_gru_cell_backward", 0, 4},
    {"_thnn_fused_lstm_cell", 0, 3}, {"_thnn_fused_lstm_cell_backward", 0, 4},
    // ---- the MXU (Matmul.cpp) ----
    {"mm", mxu | matmul_leader}, {"bmm", mxu | matmul_leader}, {"addmm", mxu | matmul_leader},
    {"baddbmm", mxu | matmul_leader}, {"addmv", mxu}, {"dot", mxu}, {"vdot", mxu},
    {"_int_mm", mxu | integer}, {"convolution_overrideable", mxu | matmul_leader},
    {"convolution_backward_overrideable", mxu},
    // ---- advanced indexing without checks: CPU index tensors allowed, as on CUDA (Fallback.cpp) ----
    {"_unsafe_index", cpu_indices}, {"_unsafe_index_put", cpu_indices},
};

// Where torchtpu disagrees with PyTorch's tags (at::Tag), and why.
enum class Tagged : uint8_t { pointwise, dynamic_output_shape };
struct Override {
  std::string_view key;
  Tagged fact;
  bool value;  // what torchtpu holds
  const char* why;
};
constexpr const char* kActivationGradient =
    "the gradient of an element-wise activation: element-wise in grad_output and the input";
constexpr Override kOverrides[] = {
    {"_copy_from", Tagged::pointwise, true,
     "the device copy or cast behind copy_: element-wise between tensors of one shape"},
    {"fill", Tagged::pointwise, true, "writes one value to every element"},
    {"zero", Tagged::pointwise, true, "writes zero to every element"},
    {"floor_divide", Tagged::pointwise, true, "element-wise like div, which PyTorch tags"},
    {"hardswish", Tagged::pointwise, true, "an element-wise activation, like hardsigmoid"},
    {"elu_backward", Tagged::pointwise, true, kActivationGradient},
    {"hardsigmoid_backward", Tagged::pointwise, true, kActivationGradient},
    {"hardswish_backward", Tagged::pointwise, true, kActivationGradient},
    {"hardtanh_backward", Tagged::pointwise, true, kActivationGradient},
    {"leaky_relu_backward", Tagged::pointwise, true, kActivationGradient},
    {"mish_backward", Tagged::pointwise, true, kActivationGradient},
    {"softplus_backward", Tagged::pointwise, true, kActivationGradient},
    {"max", Tagged::pointwise, false,
     "max.other is element-wise, but max.dim and max() are reductions: the key covers all"},
    {"min", Tagged::pointwise, false,
     "min.other is element-wise, but min.dim and min() are reductions: the key covers all"},
    {"clone", Tagged::pointwise, false,
     "its result's layout follows its memory_format argument, not its input's: recorded as an "
     "op of its own, not fused"},
    {"index", Tagged::dynamic_output_shape, false,
     "only a boolean mask makes the shape data-dependent (then the meta kernel refuses and the op "
     "runs at once); integer indices, the common case, are recorded"},
};

struct Registry {
  std::deque<std::string> names;  // storage of the keys read from the dispatcher
  std::unordered_map<std::string_view, OpTraits> traits;
  std::vector<TagOverride> overrides;

  OpTraits& at(std::string_view key) {
    auto it = traits.find(key);
    if (it != traits.end()) return it->second;
    names.emplace_back(key);
    return traits.emplace(names.back(), OpTraits{}).first->second;
  }
};

Registry build() {
  Registry r;
  // PyTorch's tags, over every overload of a key.
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle) continue;
    OpTraits& t = r.at(op_key(name.name));
    for (const at::Tag tag : handle->getTags()) {
      t.pointwise = t.pointwise || tag == at::Tag::pointwise;
      t.reduction = t.reduction || tag == at::Tag::reduction;
      t.random = t.random || tag == at::Tag::nondeterministic_seeded;
      if (tag == at::Tag::dynamic_output_shape) t.sizing = Sizing::value_dependent;
    }
  }
  for (const Override& o : kOverrides) {
    OpTraits& t = r.at(o.key);
    const bool tagged = o.fact == Tagged::pointwise ? t.pointwise
                                                    : t.sizing == Sizing::value_dependent;
    if (o.fact == Tagged::pointwise) {
      t.pointwise = o.value;
    } else {
      t.sizing = o.value ? Sizing::value_dependent : Sizing::meta_kernel;
    }
    r.overrides.push_back({std::string(o.key),
                           o.fact == Tagged::pointwise ? "pointwise" : "dynamic_output_shape",
                           tagged, o.why});
  }
  // torchtpu's table.
  for (const Row& row : kTable) {
    OpTraits& t = r.at(row.key);
    if (row.facts & vpu) t.unit = OpUnit::vpu;
    if (row.facts & mxu) t.unit = OpUnit::mxu;
    if (row.facts & matmul_leader) t.role = FusionRole::matmul_leader;
    if (row.facts & reduction_epilogue) t.role = FusionRole::reduction_epilogue;
    if (t.sizing != Sizing::value_dependent) {
      if (row.facts & sized_by_rule) t.sizing = Sizing::rule;
      if (row.facts & like_input) t.sizing = Sizing::like_input;
      if (row.facts & at_once) t.sizing = Sizing::value_dependent;
    }
    t.computes_in_float32 = (row.facts & in_float32) != 0;
    t.contiguous_operands = (row.facts & contiguous) != 0;
    t.writes_without_reading = (row.facts & writes_only) != 0;
    t.divides_integers = (row.facts & divides_integers) != 0;
    t.takes_cpu_indices = (row.facts & cpu_indices) != 0;
    t.integer_operands = (row.facts & integer) != 0;
    t.vpu_units = row.units;
    if (row.fn != Fn::none) t.fn = row.fn;
  }
  // A foreach op without a row of its own (_foreach_exp) runs on the unit of its per-tensor op
  // (exp) at that op's cost per element and with its dtype policy: the VPU executor runs it as
  // one launch over its lists (HostExecution.cpp). Its fusion facts stay its own (fused eager
  // records its per-tensor ops instead).
  std::vector<std::pair<std::string_view, std::string_view>> derived;
  for (const auto& [key, traits] : r.traits) {
    if (key.rfind("_foreach_", 0) == 0 && traits.unit == OpUnit::other) {
      derived.emplace_back(key, key.substr(9));
    }
  }
  for (const auto& [key, base] : derived) {
    auto it = r.traits.find(base);
    if (it == r.traits.end() || it->second.unit != OpUnit::vpu ||
        it->second.sizing == Sizing::value_dependent) {
      continue;
    }
    const OpTraits per_tensor = it->second;
    OpTraits& t = r.traits.at(key);
    t.unit = OpUnit::vpu;
    t.vpu_units = per_tensor.vpu_units;
    t.computes_in_float32 = per_tensor.computes_in_float32;
    t.contiguous_operands = per_tensor.contiguous_operands;
  }
  return r;
}

Registry& registry() {
  static Registry r = build();
  return r;
}

}  // namespace

const OpTraits& op_traits(std::string_view name) {
  static const OpTraits unknown;
  static const OpTraits collective = [] {
    OpTraits t;
    t.collective = true;
    return t;
  }();
  if (name.substr(0, 10) == "tpu_dist::") return collective;
  const Registry& r = registry();
  auto it = r.traits.find(op_key(name));
  return it == r.traits.end() ? unknown : it->second;
}

std::vector<TagOverride> tag_overrides() { return registry().overrides; }

std::vector<std::string> table_keys() {
  std::vector<std::string> keys;
  for (const Row& row : kTable) keys.emplace_back(row.key);
  return keys;
}

}  // namespace torchtpu::aten
