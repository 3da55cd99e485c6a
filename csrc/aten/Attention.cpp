// Fused attention on the simulated MXU, forward and backward: one implementation behind two of
// PyTorch's entry points, its flash-attention ops (what scaled_dot_product_attention takes where
// CUDA's flash rules apply: no mask) and its "overrideable" ops (masks, biases, value heads of
// another size); scaled_dot_product_attention's choice between them; and the results their meta
// kernels give fused eager and dry runs.

// PyTorch's CPU flash-attention stubs are called with the fused attention's own results
// (writes_in_place) where the wheel exports them (pytorch/Internals.h, TORCHTPU_FLASH_STUBS).
#define TORCHTPU_WANTS_FLASH_STUBS
#include "pytorch/Internals.h"

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
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
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
#include <ATen/ops/scaled_dot_product_attention_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/vdot.h>
#include <torch/library.h>

namespace torchtpu::aten {

// Fused attention (docs/simulated-chip.md, "Fused attention"). scaled_dot_product_attention on
// tpu picks PyTorch's flash backend where CUDA's flash rules apply (no mask: flash_attention_fits)
// and its "overrideable" backend for the rest it can take: 4-D inputs (key and value heads
// dividing the query heads: grouped-query attention), no dropout, float32 / bfloat16 / float16.
// Both entry points run the one implementation below. The forward is one launch that never
// writes the L x S score matrix to HBM: flash-style, each block of query rows runs QK^T, an
// online softmax and PV in VMEM, so HBM moves Q, K, V, the mask, the output and the row
// log-sum-exp; the backward recomputes the scores from those (five products). The host computes
// it with PyTorch's CPU flash-attention kernels; Q, K and V (and the output gradient) enter them
// as the MXU's passes take them at the current precision (default: rounded to bf16), the
// probabilities in float32. A float mask (an attention bias) that requires its gradient takes
// the same kernels: the backward also writes the bias's gradient, the scores' gradient summed
// over the dimensions the bias broadcasts over (attention_bias_grad), as CUDA's memory-efficient
// attention kernel gives it.

namespace {

// The mask as PyTorch's CPU flash kernel takes it: 2-D or 4-D. A mask of another rank
// broadcasts against the (batch, heads, query, key) scores from the right, as
// scaled_dot_product_attention broadcasts it: leading dimensions of one are added (a 3-D mask's
// first dimension is the heads').
at::Tensor host_attention_mask(const at::Tensor& mask) {
  at::Tensor h = host_alias(mask);
  if (h.dim() == 2 || h.dim() == 4) return h;
  while (h.dim() < 4) h = h.unsqueeze(0);
  return h;
}

// The sizes are compared as SymInts: torch.compile traces scaled_dot_product_attention on fake
// tensors with symbolic sizes, which asks this choice through the PrivateUse1 stub
// (fused_sdp_choice_stub below), and an int size would guard its symbol to its value (a Dynamo
// graph per sequence length). Comparing symbols guards only on how they relate.
bool fused_attention_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& mask, double dropout_p) {
  const auto dtype = q.scalar_type();
  const bool floating = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
  if (!(floating && k.scalar_type() == dtype && v.scalar_type() == dtype && q.dim() == 4 &&
        k.dim() == 4 && v.dim() == 4 && dropout_p == 0.0 && !q.is_nested() &&
        !(mask.has_value() && mask->defined() && mask->dim() > 4))) {
    return false;
  }
  const c10::SymIntArrayRef qs = q.sym_sizes(), ks = k.sym_sizes(), vs = v.sym_sizes();
  if (!(ks[1] > 0 && qs[1] % ks[1] == 0 && ks[1] == vs[1] && qs[0] == ks[0] &&
        ks[0] == vs[0] && qs[3] == ks[3] && ks[2] == vs[2])) {
    return false;
  }
  // A mask that does not broadcast against the (batch, heads, query, key) scores is refused by
  // the kernel: the math path then raises the CPU's error at the call (fused eager would record
  // the fused op and report it at a later, unrelated synchronization). Checked on concrete sizes
  // only: a traced graph's symbolic sizes are not specialized here.
  if (mask.has_value() && mask->defined() && !q.unsafeGetTensorImpl()->has_symbolic_sizes_strides() &&
      !mask->unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    const int64_t scores[4] = {q.size(0), q.size(1), q.size(2), k.size(2)};
    for (int64_t d = 1; d <= mask->dim(); ++d) {
      const int64_t m = mask->size(-d);
      if (m != 1 && m != scores[4 - d]) return false;
    }
  }
  return true;
}

bool heads_match(const at::Tensor& q, const at::Tensor& k, bool enable_gqa) {
  return q.dim() != 4 || k.dim() != 4 || enable_gqa || q.sym_size(1) == k.sym_size(1);
}

// CUDA's flash-attention rules (sdp_utils.cpp, use_flash_attention), less what is about the GPU:
// no explicit mask (is_causal is the one mask flash takes), one head size for query, key and
// value, non-empty sequences, no causal mask over query and key lengths that differ (CUDA's flash
// kernel aligns it to the bottom right, the math path to the top left), and the heads CUDA's flash
// takes: the same for all three, or key/value heads dividing the query heads with enable_gqa.
// Unlike CUDA's: float32 too (the MXU takes it as its passes), no bound on the head size (CUDA's
// 256 is its shared memory's) and no dropout (tpu has no dropout kernel: the math path takes it).
// On top of what the fused kernel takes at all (fused_attention_fits). Sizes compared as SymInts
// (see fused_attention_fits).
bool flash_attention_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                          bool enable_gqa) {
  if ((mask.has_value() && mask->defined()) || !heads_match(q, k, enable_gqa) ||
      !fused_attention_fits(q, k, v, mask, dropout_p) || k.device() != q.device() ||
      v.device() != q.device()) {
    return false;
  }
  const c10::SymIntArrayRef qs = q.sym_sizes(), ks = k.sym_sizes(), vs = v.sym_sizes();
  if (vs[3] != qs[3]) return false;
  if (is_causal && qs[2] != ks[2]) return false;
  // (empty sequences: checked on concrete sizes; a traced symbolic size is at least 2)
  const bool symbolic = q.unsafeGetTensorImpl()->has_symbolic_sizes_strides() ||
                        k.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
  return symbolic || (q.size(2) > 0 && k.size(2) > 0);
}

// The backend scaled_dot_product_attention takes on tpu. `flash`: whether the flash backend may be
// chosen. PyTorch's composite scaled_dot_product_attention, which asks the PrivateUse1 dispatch
// stub, sends the flash choice to the CPU's op (_scaled_dot_product_flash_attention_for_cpu) for
// every device but CUDA and XPU (attention.cpp): the stub never answers flash, and torchtpu's own
// scaled_dot_product_attention kernel (below) calls PyTorch's flash op itself where flash applies.
int64_t sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                   bool enable_gqa, bool flash) {
  const auto& context = at::globalContext();
  if (flash && context.userEnabledFlashSDP() &&
      flash_attention_fits(q, k, v, mask, dropout_p, is_causal, enable_gqa)) {
    return static_cast<int64_t>(at::SDPBackend::flash_attention);
  }
  if (context.userEnabledOverrideableSDP() && heads_match(q, k, enable_gqa) &&
      fused_attention_fits(q, k, v, mask, dropout_p)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  return static_cast<int64_t>(context.userEnabledMathSDP() ? at::SDPBackend::math
                                                           : at::SDPBackend::error);
}

// torch._fused_sdp_choice on tpu tensors: the backend scaled_dot_product_attention takes.
int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> /*scale*/, bool enable_gqa) {
  return sdp_choice(q, k, v, mask, dropout_p, is_causal, enable_gqa, /*flash=*/true);
}

// scaled_dot_product_attention on tpu tensors, registered for AutogradPrivateUse1 (calls that
// record gradients) and PrivateUse1 (inference mode, and below a dispatch mode), in place of
// PyTorch's composite implementation: where flash applies it calls PyTorch's flash op, as the
// composite does on CUDA (through autograd, whose derivative of it is
// _scaled_dot_product_flash_attention_backward); every other call goes to the composite, which
// asks the stub and takes the overrideable op or the math path. No device work of its own: not a
// kernel entry (the ops it calls enter torchtpu, and are recorded or run, themselves).
at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const std::optional<at::Tensor>& mask,
                                        double dropout_p, bool is_causal,
                                        std::optional<double> scale, bool enable_gqa) {
  if (sdp_choice(q, k, v, mask, dropout_p, is_causal, enable_gqa, /*flash=*/true) ==
      static_cast<int64_t>(at::SDPBackend::flash_attention)) {
    return std::get<0>(at::_scaled_dot_product_flash_attention(
        q, k, v, dropout_p, is_causal, /*return_debug_mask=*/false, scale));
  }
  return at::compositeimplicitautograd::scaled_dot_product_attention(q, k, v, mask, dropout_p,
                                                                     is_causal, scale, enable_gqa);
}

// Grouped-query attention: query head h reads key/value head h / group. The host kernel takes
// the key and value heads repeated; their gradients are summed back over each group.
at::Tensor heads_repeated(const at::Tensor& x, int64_t group) {
  return group == 1 ? x : x.repeat_interleave(group, /*dim=*/1);
}
at::Tensor heads_summed(const at::Tensor& g, int64_t group) {
  if (group == 1) return g;
  return g.unflatten(1, {g.size(1) / group, group}).sum(2);
}

at::Tensor mxu_operand(const at::Tensor& x, sim::Precision precision) {
  return x.scalar_type() == at::kFloat && precision == sim::Precision::kDefault ? sim::bf16_hi(x)
                                                                                : x;
}

// PyTorch's CPU flash-attention kernels read each row of the head dimension as contiguous memory
// (its CPU dispatcher picks them only when the last stride is 1): a host alias whose head
// dimension is strided (q from a permute of a channels-first tensor, as diffusers' Cosmos VAE
// makes it) is copied to rows first.
at::Tensor rows_dense(const at::Tensor& x) {
  return x.stride(-1) == 1 ? x : x.contiguous();
}

// PyTorch's CPU flash-attention kernels take one head size for Q, K and V; multi-head latent
// attention (DeepSeek's MLA: query and key heads longer than value heads) has two. The host
// operands are padded with zeros to the longer one: zero columns of Q and K add nothing to the
// scores, zero columns of V (and of O and dO in the backward) give output and gradient columns
// that are cut off again. The scale stays the query's (1 / sqrt of its head size).
at::Tensor head_padded(const at::Tensor& x, int64_t to) {
  return x.size(-1) == to ? x : at::constant_pad_nd(x, {0, to - x.size(-1)});
}
double attention_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// The strides of a tensor of `sizes` laid out as `like` is (PyTorch's meta kernel for the fused
// attention ops does the same: alloc_with_matching_layout).
c10::DimVector strides_like(const at::Tensor& like, c10::IntArrayRef sizes) {
  if (like.sizes() == sizes) {  // empty_like(like.transpose(1, 2)).transpose(1, 2)
    const at::Tensor t = like.transpose(1, 2);
    c10::DimVector strides = t.is_non_overlapping_and_dense()
                                 ? c10::DimVector(t.strides())
                                 : c10::contiguous_strides(t.sizes());
    std::swap(strides[1], strides[2]);
    return strides;
  }
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> permuted;
  for (int64_t d : order) permuted.push_back(sizes[d]);
  const auto dense = c10::contiguous_strides(permuted);
  c10::DimVector strides(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) strides[order[i]] = dense[i];
  return strides;
}

at::Tensor device_like(const at::Tensor& like, c10::IntArrayRef sizes) {
  return at::empty_strided(sizes, strides_like(like, sizes), like.options());
}

// Whether PyTorch's CPU flash-attention kernels (at::native::flash_attention_kernel and its
// backward, which take their results as arguments) can write the results straight into the
// device tensors' memory, as they do when the checks of their CPU wrappers
// (_scaled_dot_product_flash_attention_for_cpu, its backward) pass and the results need no
// reshaping: one head size, no grouped-query heads, a float32 or query-typed mask of 2 or 4
// dimensions, and rows of `dense` (the results, and operands read as they are) contiguous.
// Otherwise the wrappers run and their results are copied: three copies fewer per backward and
// two per forward (docs/host-speed.md, "The fused attention and a linear layer's bias as the CPU
// runs them").
[[maybe_unused]] bool writes_in_place(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& h_mask,
                     std::initializer_list<const at::Tensor*> dense) {
  if (q.size(1) != k.size(1) || q.size(-1) != v.size(-1) || q.numel() == 0 || k.numel() == 0) {
    return false;
  }
  if (h_mask && (h_mask->dim() != 2 && h_mask->dim() != 4)) return false;
  if (h_mask && h_mask->scalar_type() != at::kFloat && h_mask->scalar_type() != q.scalar_type()) {
    return false;
  }
  for (const at::Tensor* t : dense) {
    if (t->stride(-1) != 1) return false;
  }
  return true;
}

// The gradient of an attention bias: the scores' gradient dS = P * (dP - D), with
// P = exp(scale * Q K^T + bias - lse) (the forward's row log-sum-exp), dP = dO V^T and
// D = rowsum(dO * O) as the flash backward forms them, summed over the dimensions along which the
// bias broadcasts against the (batch, heads, query, key) scores, in the bias's dtype. Q, K, V and
// dO enter the products as the MXU's passes take them (mxu_operand), in float32. The host forms
// the L x S matrices here; the chip would write dS out of VMEM as it forms it for dQ and dK (the
// cost model charges that write).
at::Tensor attention_bias_grad(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& bias, const at::Tensor& out,
                               const at::Tensor& logsumexp, bool is_causal, double scale,
                               sim::Precision precision) {
  const int64_t group = q.size(1) / k.size(1);
  auto operand = [&](const at::Tensor& x) { return mxu_operand(x, precision).to(at::kFloat); };
  const at::Tensor hq = operand(host_alias(q));
  const at::Tensor hk = operand(heads_repeated(host_alias(k), group));
  const at::Tensor hv = operand(heads_repeated(host_alias(v), group));
  const at::Tensor hgo = operand(host_alias(grad_out));
  const at::Tensor h_bias = host_attention_mask(bias);
  at::Tensor scores = at::matmul(hq, hk.transpose(-2, -1)).mul_(scale).add_(h_bias.to(at::kFloat));
  if (is_causal) {  // (the top-left triangle, as the flash kernels take it)
    const int64_t L = scores.size(-2), S = scores.size(-1);
    scores.masked_fill_(at::ones({L, S}, scores.options().dtype(at::kBool)).tril().logical_not(),
                        -std::numeric_limits<float>::infinity());
  }
  const at::Tensor lse = host_alias(logsumexp).unsqueeze(-1);
  // (a row whose every key is masked has no probability anywhere, hence no gradient)
  const at::Tensor p = scores.sub_(lse).exp_().masked_fill_(lse.isneginf(), 0);
  const at::Tensor d = hgo.mul(host_alias(out).to(at::kFloat)).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = at::matmul(hgo, hv.transpose(-2, -1)).sub_(d).mul_(p);
  return at::sum_to(ds, h_bias.sizes()).reshape(bias.sizes()).to(bias.scalar_type());
}

// The two entry points' names and what differs between them: their results laid out as
// PyTorch's meta kernel of each lays them out (torch.compile plans with those; fused eager with
// attention_meta_results, below, which gives the same).
struct AttentionOp {
  const std::string& name;
  bool flash;  // _scaled_dot_product_flash_attention (else the overrideable op)
};
const std::string kOverrideable = "aten::_scaled_dot_product_fused_attention_overrideable";
const std::string kOverrideableBackward =
    "aten::_scaled_dot_product_fused_attention_overrideable_backward";
const std::string kFlash = "aten::_scaled_dot_product_flash_attention";
const std::string kFlashBackward = "aten::_scaled_dot_product_flash_attention_backward";

using AttentionResults = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
                                    c10::SymInt, at::Tensor, at::Tensor, at::Tensor>;

AttentionResults attention_forward(const AttentionOp& op, const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, const std::optional<at::Tensor>& attn_bias,
                                   double dropout_p, bool is_causal, bool return_debug_mask,
                                   std::optional<double> scale) {
  TORCH_CHECK(fused_attention_fits(q, k, v, attn_bias, dropout_p), op.name.substr(6),
              " on tpu takes 4-D float32, bfloat16 or float16 query, key and value (key/value "
              "heads dividing the query heads), no dropout and a mask of at most 4 dimensions; "
              "scaled_dot_product_attention picks the math path otherwise");
  TORCH_CHECK(!return_debug_mask, "tpu's fused attention keeps no attention weights "
              "(return_debug_mask=True): use the math path");
  const at::Tensor mask = attn_bias.has_value() ? *attn_bias : at::Tensor();
  check_same_device(op.name.c_str(), {&q, &k, &v, mask.defined() ? &mask : nullptr});
  wait_for_device(q.device());
  const runtime::metrics::HostTime timed(op.name, /*lasting=*/true);
  const auto precision = sim::current_precision();
  std::optional<at::Tensor> h_mask;
  if (mask.defined()) h_mask = host_attention_mask(mask);
  const int64_t group = q.size(1) / k.size(1);  // grouped-query attention: query heads per KV head
  const int64_t head = std::max(q.size(-1), v.size(-1));
  std::vector<int64_t> out_sizes = q.sizes().vec();
  out_sizes.back() = v.size(-1);
  // (flash: one head size, the output laid out as empty_like(query), as PyTorch's meta kernel)
  at::Tensor out = op.flash ? at::empty_like(q) : device_like(q, out_sizes);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  bool in_place = false;
#ifdef TORCHTPU_FLASH_STUBS
  in_place = writes_in_place(q, k, v, h_mask, {&out});
  if (in_place) {
    at::native::flash_attention_kernel(
        at::kCPU, host_alias(out).transpose(1, 2), host_alias(lse).transpose(1, 2),
        rows_dense(mxu_operand(host_alias(q), precision)),
        rows_dense(mxu_operand(host_alias(k), precision)),
        rows_dense(mxu_operand(host_alias(v), precision)), 0.0, is_causal, h_mask,
        attention_scale(q, scale));
  }
#endif
  if (!in_place) {
    auto [h_out, h_lse] = at::_scaled_dot_product_flash_attention_for_cpu(
        rows_dense(head_padded(mxu_operand(host_alias(q), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(k), group), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(v), group), precision), head)),
        0.0, is_causal, h_mask, attention_scale(q, scale));
    host_alias(out).copy_(h_out.narrow(-1, 0, v.size(-1)));
    host_alias(lse).copy_(h_lse);
  }
  sim::record(op.name, attention_estimate(q, k, v, mask, false, false, is_causal));
  // (no dropout: the generator's seed and offset are never read, and left unset as CUDA's flash
  // kernel leaves them; filling them would cost two launches. The flash op's are shaped as its
  // meta kernel shapes them, with an empty debug mask.)
  if (op.flash) {
    const auto seed_options = q.options().dtype(at::kUInt64);
    return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(q.size(2)), c10::SymInt(k.size(2)),
            at::empty({2}, seed_options), at::empty({}, seed_options), at::empty({0}, q.options())};
  }
  const auto seed_options = q.options().dtype(at::kLong);
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(q.size(2)), c10::SymInt(k.size(2)),
          at::empty({}, seed_options), at::empty({}, seed_options), at::Tensor()};
}

AttentionResults fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const std::optional<at::Tensor>& attn_bias, double dropout_p,
                                 bool is_causal, bool return_debug_mask,
                                 std::optional<double> scale) {
  return attention_forward({kOverrideable, false}, q, k, v, attn_bias, dropout_p, is_causal,
                           return_debug_mask, scale);
}

// PyTorch's flash op, called directly or by scaled_dot_product_attention: what CUDA's flash kernel
// takes (one head size; its meta kernel sizes the output as the query), and no causal mask over
// lengths that differ, which CUDA's kernel aligns to the bottom right where tpu's kernel (the
// math path's alignment) would silently differ.
// (Also made where fused eager sizes the op, so that the error is raised at the call.)
void check_flash_call(const std::string& name, const at::Tensor& q, const at::Tensor& k,
                      const at::Tensor& v, bool is_causal) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && v.size(-1) == q.size(-1) &&
                  k.size(-1) == q.size(-1),
              name.substr(6), " on tpu takes 4-D query, key and value of one head size; "
              "scaled_dot_product_attention takes the fused kernel for others");
  TORCH_CHECK(!is_causal || q.size(2) == k.size(2), name.substr(6), " on tpu: is_causal with ",
              q.size(2), " query and ", k.size(2), " key positions (CUDA's flash kernel aligns "
              "that mask to the bottom right, scaled_dot_product_attention's math path to the top "
              "left); call scaled_dot_product_attention, which takes the fused kernel with the "
              "top-left mask");
}

AttentionResults flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 double dropout_p, bool is_causal, bool return_debug_mask,
                                 std::optional<double> scale) {
  check_flash_call(kFlash, q, k, v, is_causal);
  return attention_forward({kFlash, true}, q, k, v, std::nullopt, dropout_p, is_causal,
                           return_debug_mask, scale);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const std::string& name, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "tpu's fused attention has no dropout");
  TORCH_CHECK(!(grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() == at::kBool),
              name.substr(6), ": a boolean mask has no gradient");
  check_same_device(name.c_str(), {&grad_out, &q, &k, &v, &out, &logsumexp});
  wait_for_device(q.device());
  const runtime::metrics::HostTime timed(name, /*lasting=*/true);
  const auto precision = sim::current_precision();
  std::optional<at::Tensor> h_mask;
  if (attn_bias.defined()) h_mask = host_attention_mask(attn_bias);
  const int64_t group = q.size(1) / k.size(1);
  const int64_t head = std::max(q.size(-1), v.size(-1));  // (see head_padded)
  // The gradients asked for, laid out as empty_like lays them out (as PyTorch's meta kernel
  // does, which fused eager and torch.compile plan with). The mask's is shaped so even when it
  // is not asked for (the meta kernel's result), and written only when it is.
  auto grad_like = [](bool wanted, const at::Tensor& t) {
    return wanted && t.defined() ? at::empty_like(t) : at::Tensor();
  };
  const at::Tensor dq = grad_like(grad_input_mask[0], q), dk = grad_like(grad_input_mask[1], k),
                   dv = grad_like(grad_input_mask[2], v), dmask = grad_like(true, attn_bias);
  bool in_place = false;
#ifdef TORCHTPU_FLASH_STUBS
  in_place = dq.defined() && dk.defined() && dv.defined() &&
             writes_in_place(q, k, v, h_mask, {&dq, &dk, &dv});
  if (in_place) {
    // The kernel adds each block's share to the gradients of the keys and values it read.
    const at::Tensor h_dq = host_alias(dq), h_dk = host_alias(dk), h_dv = host_alias(dv);
    h_dq.zero_();
    h_dk.zero_();
    h_dv.zero_();
    auto rows_first = [](const at::Tensor& x) { return x.transpose(1, 2); };
    at::native::flash_attention_backward_kernel(
        at::kCPU, rows_first(h_dq), rows_first(h_dk), rows_first(h_dv),
        rows_first(rows_dense(mxu_operand(host_alias(grad_out), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(q), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(k), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(v), precision))),
        rows_first(rows_dense(host_alias(out))), rows_first(host_alias(logsumexp)), 0.0,
        is_causal, h_mask, attention_scale(q, scale));
  }
#endif
  if (!in_place) {
    auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        rows_dense(head_padded(mxu_operand(host_alias(grad_out), precision), head)),
        rows_dense(head_padded(mxu_operand(host_alias(q), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(k), group), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(v), group), precision), head)),
        rows_dense(head_padded(host_alias(out), head)), host_alias(logsumexp), 0.0, is_causal,
        h_mask, attention_scale(q, scale));
    if (dq.defined()) host_alias(dq).copy_(gq.narrow(-1, 0, q.size(-1)));
    if (dk.defined()) host_alias(dk).copy_(heads_summed(gk.narrow(-1, 0, k.size(-1)), group));
    if (dv.defined()) host_alias(dv).copy_(heads_summed(gv.narrow(-1, 0, v.size(-1)), group));
  }
  const bool bias_grad = grad_input_mask[3] && attn_bias.defined();
  if (bias_grad) {
    host_alias(dmask).copy_(attention_bias_grad(grad_out, q, k, v, attn_bias, out, logsumexp,
                                                is_causal, attention_scale(q, scale), precision));
  }
  sim::record(name, attention_estimate(q, k, v, attn_bias, true, bias_grad, is_causal));
  return {dq, dk, dv, dmask};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/,
    std::optional<double> scale) {
  return attention_backward(kOverrideableBackward, grad_out, q, k, v, attn_bias, grad_input_mask,
                            out, logsumexp, dropout_p, is_causal, scale);
}

// (The three gradients, laid out as empty_like lays them out, as PyTorch's meta kernel.)
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/,
    double dropout_p, bool is_causal, const at::Tensor& /*philox_seed*/,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  check_flash_call(kFlashBackward, q, k, v, is_causal);
  auto [dq, dk, dv, unused] =
      attention_backward(kFlashBackward, grad_out, q, k, v, at::Tensor(), {true, true, true, false},
                         out, logsumexp, dropout_p, is_causal, scale);
  return {dq, dk, dv};
}

}  // namespace

std::optional<std::vector<at::Tensor>> attention_meta_results(
    const std::string& name, c10::ArrayRef<c10::IValue> args,
    std::vector<std::pair<size_t, c10::IValue>>* constants) {
  auto meta = [](c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
    return at::detail::empty_strided_meta(sizes, strides, dtype, std::nullopt, std::nullopt,
                                          std::nullopt);
  };
  auto like = [&](const at::Tensor& t) { return meta(t.sizes(), t.strides(), t.scalar_type()); };
  if (name == kFlash) {
    // (query, key, value, dropout_p, is_causal, return_debug_mask, scale) -> as the overrideable
    // op's, laid out as PyTorch's meta kernel lays them out (output as empty_like(query), a seed
    // of two and an offset, uint64, an empty debug mask)
    const at::Tensor& q = args[0].toTensor();
    const at::Tensor& k = args[1].toTensor();
    check_flash_call(kFlash, q, k, args[2].toTensor(), args[4].toBool());
    const std::vector<int64_t> lse_sizes{q.size(0), q.size(1), q.size(2)};
    constants->emplace_back(4, c10::IValue(q.size(2)));
    constants->emplace_back(5, c10::IValue(k.size(2)));
    return std::vector<at::Tensor>{
        at::empty_like(like(q)), meta(lse_sizes, c10::contiguous_strides(lse_sizes), at::kFloat),
        at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), meta({2}, {1}, at::kUInt64),
        meta({}, {}, at::kUInt64), meta({0}, {1}, q.scalar_type())};
  }
  if (name == kFlashBackward) {
    // (grad_out, query, key, value, ...) -> (grad_q, grad_k, grad_v), as empty_like lays them out
    check_flash_call(kFlashBackward, args[1].toTensor(), args[2].toTensor(), args[3].toTensor(),
                     args[11].toBool());
    return std::vector<at::Tensor>{at::empty_like(like(args[1].toTensor())),
                                   at::empty_like(like(args[2].toTensor())),
                                   at::empty_like(like(args[3].toTensor()))};
  }
  if (name == kOverrideable) {
    // (query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale) ->
    // (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
    //  debug_attn_mask)
    const at::Tensor& q = args[0].toTensor();
    const at::Tensor& k = args[1].toTensor();
    const at::Tensor& v = args[2].toTensor();
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return std::nullopt;
    std::vector<int64_t> out_sizes = q.sizes().vec();
    out_sizes.back() = v.size(-1);
    const std::vector<int64_t> lse_sizes{q.size(0), q.size(1), q.size(2)};
    constants->emplace_back(4, c10::IValue(q.size(2)));
    constants->emplace_back(5, c10::IValue(k.size(2)));
    return std::vector<at::Tensor>{
        meta(out_sizes, strides_like(q, out_sizes), q.scalar_type()),
        meta(lse_sizes, c10::contiguous_strides(lse_sizes), at::kFloat), at::Tensor(),
        at::Tensor(), at::Tensor(), at::Tensor(), meta({}, {}, at::kLong), meta({}, {}, at::kLong),
        at::Tensor()};
  }
  if (name == kOverrideableBackward) {
    // (grad_out, query, key, value, attn_bias, ...) -> (grad_q, grad_k, grad_v, grad_attn_bias),
    // each laid out as empty_like lays it out (the kernel's results are empty_like's): an
    // expanded mask (a causal mask broadcast over the batch) gives a dense gradient, not one
    // with its zero strides.
    auto empty_like_of = [&](const at::Tensor& t) { return at::empty_like(like(t)); };
    const at::Tensor& bias = args[4].isTensor() ? args[4].toTensor() : at::Tensor();
    return std::vector<at::Tensor>{empty_like_of(args[1].toTensor()),
                                   empty_like_of(args[2].toTensor()),
                                   empty_like_of(args[3].toTensor()),
                                   bias.defined() ? empty_like_of(bias) : at::Tensor()};
  }
  return std::nullopt;
}

// The choice PyTorch's composite scaled_dot_product_attention asks for (never flash: see
// sdp_choice).
int64_t fused_sdp_choice_stub(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const std::optional<at::Tensor>& mask, double dropout_p,
                              bool is_causal, std::optional<double> /*scale*/, bool enable_gqa) {
  return sdp_choice(q, k, v, mask, dropout_p, is_causal, enable_gqa, /*flash=*/false);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", entry(TORCH_FN(fused_sdp_choice), Capture::none));
  m.impl("_scaled_dot_product_flash_attention",
         entry(TORCH_FN(flash_attention), Capture::new_results));
  m.impl("_scaled_dot_product_flash_attention_backward",
         entry(TORCH_FN(flash_attention_backward), Capture::new_results));
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         entry(TORCH_FN(fused_attention), Capture::new_results));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         entry(TORCH_FN(fused_attention_backward), Capture::new_results));
  // (no entry: it chooses, and the ops it calls enter torchtpu themselves)
  m.impl("scaled_dot_product_attention", TORCH_FN(scaled_dot_product_attention));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("scaled_dot_product_attention", TORCH_FN(scaled_dot_product_attention));
}

}  // namespace torchtpu::aten

// The same choice for PyTorch's meta function of _fused_sdp_choice (fake tensors of device
// "tpu", as torch.compile traces them), which asks the PrivateUse1 dispatch stub.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchtpu::aten::fused_sdp_choice_stub)
}  // namespace at::native
