// The fused attention kernel's charge (docs/simulated-chip.md, "Fused attention"): the blocks a
// flash-style kernel computes, the products it runs on the MXU, its score work on the VPU and its
// HBM traffic, for the forward and the backward (Attention.cpp runs the kernel).
#include "aten/Products.h"
#include "runtime/Device.h"
#include "sim/CostModel.h"
#include "sim/Mxu.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <vector>

namespace torchtpu::aten {
namespace {

// The kernel's tiles: blocks of kAttentionBlock query rows, each against blocks of as many keys.
constexpr int64_t kAttentionBlock = 512;

// A causal kernel's work, block by block (PyTorch's is_causal: query i sees keys j <= i, the
// top-left alignment): query block b sees the key blocks up to its last row, rounded up to a
// whole block (the diagonal block is computed, masked); blocks above the diagonal are skipped.
// Each entry is (rows of the block, keys it sees); without is_causal one entry (L, S).
struct ScoreBlock {
  int64_t rows, keys;
};
std::vector<ScoreBlock> score_blocks(int64_t L, int64_t S, bool causal) {
  if (!causal || L <= 0 || S <= 0) return {{L, S}};
  std::vector<ScoreBlock> out;
  for (int64_t r0 = 0; r0 < L; r0 += kAttentionBlock) {
    const int64_t rows = std::min(kAttentionBlock, L - r0);
    const int64_t seen = (r0 + rows + kAttentionBlock - 1) / kAttentionBlock * kAttentionBlock;
    const int64_t keys = std::min(S, seen);
    if (!out.empty() && out.back().keys == keys && out.back().rows + rows <= L) {
      out.back().rows += rows;  // (key blocks past S: the same keys as the block before)
    } else {
      out.push_back({rows, keys});
    }
  }
  return out;
}
// The same from the keys' side (the backward's dK and dV): key block c is seen by the query
// rows from its first key on; each entry is (keys of the block, query rows that see it).
std::vector<ScoreBlock> key_blocks(int64_t L, int64_t S, bool causal) {
  if (!causal || L <= 0 || S <= 0) return {{S, L}};
  std::vector<ScoreBlock> out;
  for (int64_t c0 = 0; c0 < S; c0 += kAttentionBlock) {
    const int64_t keys = std::min(kAttentionBlock, S - c0);
    const int64_t first_row = c0 / kAttentionBlock * kAttentionBlock;
    if (first_row >= L) break;  // no query row sees these keys
    out.push_back({keys, L - first_row});
  }
  return out;
}

// K and V of one (batch, KV head) are read from HBM once when they fit half of VMEM; otherwise
// once per block of query rows (a causal block reads only the key blocks it sees).
double attention_kv_reads(int64_t L, int64_t S, int64_t E, int64_t Ev, int64_t bytes,
                          const std::vector<ScoreBlock>& blocks) {
  const double per_head = double(S) * double(E + Ev) * double(bytes);
  if (per_head <= double(runtime::current_chip().vmem_bytes) / 2 || S <= 0) return 1;
  double reads = 0;
  for (const ScoreBlock& b : blocks) {
    reads += double((b.rows + kAttentionBlock - 1) / kAttentionBlock) * double(b.keys) / double(S);
  }
  return reads;
}

}  // namespace

// The fused kernel's charge. Grouped-query attention takes the query heads of a KV head together
// (G = query heads per KV head): each product is over (batch x KV heads) with G x L query rows,
// as TPU attention kernels stack the group's queries against their shared keys and values (one
// decode token per head is then G rows, not G products of one row). With is_causal the products
// and the score work cover only the blocks the kernel computes (score_blocks): about half of the
// non-causal work for long sequences. `bias_grad`: the backward also writes the gradient of the
// mask (an attention bias).
sim::Estimate attention_estimate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, bool backward, bool bias_grad,
                                 bool causal) {
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const int64_t batch_q = L * E > 0 ? q.numel() / (L * E) : 0;
  // KV heads of the products, and query heads stacked per KV head.
  const int64_t kv = S * k.size(-1) > 0 ? k.numel() / (S * k.size(-1)) : 0;
  const int64_t group = kv > 0 && batch_q % kv == 0 ? batch_q / kv : 1;
  const int64_t batch = group > 1 ? kv : batch_q;
  const int bytes = static_cast<int>(q.element_size());
  auto padded = [](const at::Tensor& t) {
    return t.defined() ? sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size()))
                       : 0.0;
  };
  const std::vector<ScoreBlock> rows = score_blocks(L, S, causal);
  const std::vector<ScoreBlock> cols = key_blocks(L, S, causal);
  const double kv_bytes =
      attention_kv_reads(L, S, E, Ev, bytes, rows) * (padded(k) + padded(v));
  const double out = sim::CostModel::padded_bytes({batch_q, L, Ev}, bytes);
  const double lse = sim::CostModel::padded_bytes({batch_q, L}, 4);
  const auto dtype = q.scalar_type();
  const auto& model = sim::cost_model();
  double scores = 0;  // score elements computed, over every (batch, query head)
  for (const ScoreBlock& b : rows) scores += double(batch_q) * double(b.rows) * double(b.keys);
  sim::Work w;
  auto product = [&](int64_t M, int64_t K, int64_t N) {
    if (M <= 0 || K <= 0 || N <= 0) return;
    const sim::Estimate m = sim::matmul_estimate(batch, group * M, K, N, dtype, 0);
    w.matmuls.append(m.work.matmuls.begin(), m.work.matmuls.end());
  };
  double hbm = 0;
  if (!backward) {
    // QK^T, then PV, per query block; the softmax (scale, mask, max, exp, sum, rescale) on the
    // VPU.
    for (const ScoreBlock& b : rows) {
      product(b.rows, E, b.keys);
      product(b.rows, b.keys, Ev);
    }
    w.vpu_units = model.vpu_units(static_cast<int64_t>(scores), 6.0);
    hbm = padded(q) + kv_bytes + padded(mask) + out + lse;
  } else {
    // Read Q, K, V, O, dO, the mask and the log-sum-exp; write dQ, dK, dV. Products: S = QK^T
    // again, dP = dO V^T and dQ = dS K per query block; dV = P^T dO and dK = dS^T Q per key
    // block. With the bias's gradient, dS (formed on the VPU for dQ and dK) is also written out.
    for (const ScoreBlock& b : rows) {
      product(b.rows, E, b.keys);
      product(b.rows, Ev, b.keys);
      product(b.rows, b.keys, E);
    }
    for (const ScoreBlock& c : cols) {
      // (the G query heads of a KV head are summed into its dK and dV: K = G x rows)
      const int64_t M = c.rows, K = group * c.keys;
      if (M > 0 && K > 0) {
        for (const int64_t N : {Ev, E}) {
          const sim::Estimate m = sim::matmul_estimate(batch, M, K, N, dtype, 0);
          w.matmuls.append(m.work.matmuls.begin(), m.work.matmuls.end());
        }
      }
    }
    w.vpu_units = model.vpu_units(static_cast<int64_t>(scores), 8.0);
    hbm = 2 * (padded(q) + padded(k) + padded(v)) + 2 * out + padded(mask) + lse +
          (kv_bytes - padded(k) - padded(v)) + (bias_grad ? padded(mask) : 0.0);
  }
  w.hbm_bytes = hbm;
  w.launches = 1;
  return model.price(w);
}


}  // namespace torchtpu::aten
