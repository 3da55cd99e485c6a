// flash-attn's own entry points on tpu, aten::_flash_attention_forward and
// _flash_attention_backward: what torch.nn.attention.varlen.varlen_attn calls (sequences of
// several lengths packed into one tensor, as TorchTitan's document masking packs them) and what
// code written for CUDA's flash kernel calls directly.
//
// Composites, with no device work of their own: each sequence is one call of tpu's fused
// attention (the "overrideable" op of Attention.cpp: grouped-query heads, an explicit mask), so
// the work is run, charged and counted as that kernel, recorded in fused eager like any op. The
// conventions are flash-attn's, which differ from scaled_dot_product_attention's:
// - the query is (batch, length, heads, dim), or packed (total, heads, dim) with cum_seq_q and
//   cum_seq_k (batch + 1 offsets) giving each sequence's rows; the key and value alike;
// - a causal mask and the sliding window are aligned to the bottom right: query row i of a
//   sequence of lq rows sees key j of lk iff j <= i + (lk - lq) when causal, and
//   i + (lk - lq) - left <= j <= i + (lk - lq) + right for a window (-1: unbounded);
// - the log-sum-exp is (batch, heads, length), packed (heads, total).
// Packed sequences are read from cum_seq_* on the host: a read of the device (in fused eager a
// materialization point, counted as one), as flash-attn's kernel reads them on the device.
#include "aten/Entry.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <tuple>
#include <vector>

namespace torchtpu::aten {
namespace {

struct Window {
  int64_t left = -1, right = -1;  // -1: unbounded
  bool causal = false;
};

Window window_of(bool is_causal, std::optional<c10::SymInt> left,
                 std::optional<c10::SymInt> right) {
  Window w;
  w.causal = is_causal;
  if (left.has_value()) w.left = left->guard_int(__FILE__, __LINE__);
  if (right.has_value()) w.right = right->guard_int(__FILE__, __LINE__);
  if (w.causal) w.right = 0;  // (flash-attn: causal is a window with nothing to the right)
  return w;
}

// The mask of one sequence, additive as scaled_dot_product_attention hands masks to the fused
// kernel (0 where the key takes part, -inf elsewhere), or none where the kernel's own causal
// flag says the same (equal lengths: top left and bottom right coincide).
std::optional<at::Tensor> sequence_mask(const Window& w, int64_t lq, int64_t lk,
                                        const at::Tensor& like) {
  const bool banded = w.left >= 0 || (w.right >= 0 && !(w.causal && w.right == 0));
  if (!banded && (!w.causal || lq == lk)) return std::nullopt;
  const auto cpu = at::TensorOptions().dtype(at::kLong);
  const at::Tensor diagonal = at::arange(lq, cpu).unsqueeze(1).add(lk - lq);  // key of query i
  const at::Tensor key = at::arange(lk, cpu).unsqueeze(0);
  at::Tensor mask = at::ones({lq, lk}, cpu.dtype(at::kBool));
  if (w.right >= 0) mask = at::logical_and(mask, key.le(diagonal.add(w.right)));
  if (w.left >= 0) mask = at::logical_and(mask, key.ge(diagonal.sub(w.left)));
  return at::zeros({lq, lk}, cpu.dtype(like.scalar_type()))
      .masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity())
      .to(like.device());
}

bool mask_is_causal_flag(const Window& w, int64_t lq, int64_t lk) {
  return w.causal && lq == lk && w.left < 0;
}

// Each sequence's [start, end) rows, from cum_seq (batch + 1 offsets), or one "sequence" per
// batch entry of a dense tensor (empty: the caller uses the whole batch at once).
std::vector<int64_t> offsets(const std::optional<at::Tensor>& cum_seq) {
  if (!cum_seq.has_value() || !cum_seq->defined()) return {};
  const at::Tensor host = cum_seq->to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + host.numel());
}

// (length, heads, dim) -> (1, heads, length, dim), the fused kernel's layout.
at::Tensor heads_first(const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0); }

using ForwardResults = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

ForwardResults flash_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& cum_seq_q,
                             const std::optional<at::Tensor>& cum_seq_k, c10::SymInt /*max_q*/,
                             c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
                             bool return_debug_mask, std::optional<double> scale,
                             std::optional<c10::SymInt> window_left,
                             std::optional<c10::SymInt> window_right,
                             const std::optional<at::Tensor>& seqused_k,
                             const std::optional<at::Tensor>& alibi_slopes,
                             const std::optional<at::Tensor>& block_table,
                             std::optional<int64_t> /*num_splits*/) {
  TORCH_CHECK(dropout_p == 0.0, "_flash_attention_forward on tpu: no dropout (tpu's fused "
              "attention has none)");
  TORCH_CHECK(!return_debug_mask, "_flash_attention_forward on tpu keeps no attention weights "
              "(return_debug_mask=True)");
  TORCH_CHECK(!(seqused_k.has_value() && seqused_k->defined()) &&
                  !(alibi_slopes.has_value() && alibi_slopes->defined()) &&
                  !(block_table.has_value() && block_table->defined()),
              "_flash_attention_forward on tpu: seqused_k, alibi_slopes and block_table (a paged "
              "KV cache) are not supported; pass each sequence's keys packed with cum_seq_k");
  TORCH_CHECK(cum_seq_q.has_value() == cum_seq_k.has_value(), "_flash_attention_forward: "
              "cum_seq_q and cum_seq_k are given together or not at all");
  const Window w = window_of(is_causal, window_left, window_right);
  const auto seed_options = q.options().dtype(at::kUInt64);
  at::Tensor rng_state = at::empty({2}, seed_options), unused = at::empty({}, seed_options);
  at::Tensor debug_mask = at::empty({0}, q.options());
  const std::vector<int64_t> sq = offsets(cum_seq_q), sk = offsets(cum_seq_k);
  if (sq.empty()) {  // dense: (batch, length, heads, dim), one call for the batch
    TORCH_CHECK(q.dim() == 4, "_flash_attention_forward: a 4-D query (batch, length, heads, "
                "dim) without cum_seq_q, got ", q.dim(), " dimensions");
    const int64_t lq = q.size(1), lk = k.size(1);
    auto r = at::_scaled_dot_product_fused_attention_overrideable(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        sequence_mask(w, lq, lk, q), 0.0, mask_is_causal_flag(w, lq, lk), false, scale);
    at::Tensor out = at::empty_like(q);
    out.copy_(std::get<0>(r).transpose(1, 2));
    return {out, std::get<1>(r), rng_state, unused, debug_mask};
  }
  TORCH_CHECK(q.dim() == 3 && sq.size() == sk.size(), "_flash_attention_forward: packed "
              "sequences take a 3-D query (total, heads, dim) and cum_seq_q, cum_seq_k of one "
              "length");
  at::Tensor out = at::empty_like(q);
  at::Tensor lse = at::empty({q.size(1), q.size(0)}, q.options().dtype(at::kFloat));
  for (size_t b = 0; b + 1 < sq.size(); ++b) {
    const int64_t lq = sq[b + 1] - sq[b], lk = sk[b + 1] - sk[b];
    if (lq == 0) continue;
    auto r = at::_scaled_dot_product_fused_attention_overrideable(
        heads_first(q.narrow(0, sq[b], lq)), heads_first(k.narrow(0, sk[b], lk)),
        heads_first(v.narrow(0, sk[b], lk)), sequence_mask(w, lq, lk, q), 0.0,
        mask_is_causal_flag(w, lq, lk), false, scale);
    out.narrow(0, sq[b], lq).copy_(std::get<0>(r).squeeze(0).transpose(0, 1));
    lse.narrow(1, sq[b], lq).copy_(std::get<1>(r).squeeze(0));
  }
  return {out, lse, rng_state, unused, debug_mask};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p,
    bool is_causal, const at::Tensor& /*rng_state*/, const at::Tensor& /*unused*/,
    std::optional<double> scale, std::optional<c10::SymInt> window_left,
    std::optional<c10::SymInt> window_right) {
  TORCH_CHECK(dropout_p == 0.0, "_flash_attention_backward on tpu: no dropout");
  const Window w = window_of(is_causal, window_left, window_right);
  const std::array<bool, 4> grads{true, true, true, false};
  const at::Tensor none;  // (philox seed and offset: no dropout, never read)
  const std::vector<int64_t> sq = offsets(cum_seq_q), sk = offsets(cum_seq_k);
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  if (sq.empty()) {
    const int64_t lq = q.size(1), lk = k.size(1);
    const auto mask = sequence_mask(w, lq, lk, q);
    auto r = at::_scaled_dot_product_fused_attention_overrideable_backward(
        grad_out.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        mask.value_or(at::Tensor()), grads, out.transpose(1, 2), lse, none, none, lq, lk, 0.0,
        mask_is_causal_flag(w, lq, lk), none, none, scale);
    dq.copy_(std::get<0>(r).transpose(1, 2));
    dk.copy_(std::get<1>(r).transpose(1, 2));
    dv.copy_(std::get<2>(r).transpose(1, 2));
    return {dq, dk, dv};
  }
  // (sequences are disjoint rows of the packed tensors, as flash-attn takes them; keys no
  // sequence covers keep a zero gradient)
  dk.zero_();
  dv.zero_();
  for (size_t b = 0; b + 1 < sq.size(); ++b) {
    const int64_t lq = sq[b + 1] - sq[b], lk = sk[b + 1] - sk[b];
    if (lq == 0) continue;
    const auto mask = sequence_mask(w, lq, lk, q);
    auto r = at::_scaled_dot_product_fused_attention_overrideable_backward(
        heads_first(grad_out.narrow(0, sq[b], lq)), heads_first(q.narrow(0, sq[b], lq)),
        heads_first(k.narrow(0, sk[b], lk)), heads_first(v.narrow(0, sk[b], lk)),
        mask.value_or(at::Tensor()), grads, heads_first(out.narrow(0, sq[b], lq)),
        lse.narrow(1, sq[b], lq).unsqueeze(0).contiguous(), none, none, lq, lk, 0.0,
        mask_is_causal_flag(w, lq, lk), none, none, scale);
    dq.narrow(0, sq[b], lq).copy_(std::get<0>(r).squeeze(0).transpose(0, 1));
    dk.narrow(0, sk[b], lk).copy_(std::get<1>(r).squeeze(0).transpose(0, 1));
    dv.narrow(0, sk[b], lk).copy_(std::get<2>(r).squeeze(0).transpose(0, 1));
  }
  return {dq, dk, dv};
}

}  // namespace

// (no entry: composites; the fused attention they call enters torchtpu, and is recorded or run,
// itself)
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_flash_attention_forward", TORCH_FN(flash_forward));
  m.impl("_flash_attention_backward", TORCH_FN(flash_backward));
}

}  // namespace torchtpu::aten
