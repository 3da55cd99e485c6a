#include "sim/Reference.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

namespace torchtpu::sim {
namespace {

// parts[p] holds part p (hi, mid, lo) of every element as the passes of `precision` take it
// (operand_part: at kDefault only part 0, bf16(x)).
std::vector<std::vector<float>> split_all(const float* x, int64_t n, Precision precision) {
  std::vector<std::vector<float>> parts(3, std::vector<float>(n, 0.0f));
  for (int64_t i = 0; i < n; ++i) {
    if (precision == Precision::kDefault) {
      parts[0][i] = round_bf16(x[i]);
    } else {
      split_bf16(x[i], parts[0][i], parts[1][i], parts[2][i]);
    }
  }
  return parts;
}

}  // namespace

void reference_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                      int mxu_dim, Precision precision) {
  const auto a = split_all(A, M * K, precision);
  const auto b = split_all(B, K * N, precision);
  const PassPair* pairs = pass_pairs(precision);
  const int n_passes = passes(precision);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float partial[6];
      for (int p = 0; p < n_passes; ++p) {
        const auto& ap = a[pairs[p].a_part];
        const auto& bp = b[pairs[p].b_part];
        float result = 0.0f;
        for (int64_t k0 = 0; k0 < K; k0 += mxu_dim) {
          const int64_t k1 = std::min<int64_t>(K, k0 + mxu_dim);
          float acc = 0.0f;
          for (int64_t k = k0; k < k1; ++k) acc += ap[m * K + k] * bp[k * N + n];
          result += acc;
        }
        partial[p] = result;
      }
      C[m * N + n] = combine_passes(partial, n_passes);
    }
  }
}

SystolicResult systolic_tile(const float* A, int64_t lda, const float* W, int64_t ldw,
                             const float* acc_in, float* out, int64_t ldo, int64_t M, int64_t Kt,
                             int64_t Nt, int S) {
  TORCH_CHECK(Kt <= S && Nt <= S && M >= 0, "tile larger than the array");
  // Weight registers, loaded from the top one row per cycle: after S cycles row i holds W[i].
  std::vector<float> w(size_t(S) * S, 0.0f);
  int64_t cycles = 0;
  for (int step = 0; step < S; ++step) {
    for (int i = S - 1; i > 0; --i) {
      std::copy(&w[size_t(i - 1) * S], &w[size_t(i - 1) * S] + S, &w[size_t(i) * S]);
    }
    const int row = S - 1 - step;  // the row entering now ends up at index `row`
    for (int j = 0; j < S; ++j) {
      w[j] = (row < Kt && j < Nt) ? W[row * ldw + j] : 0.0f;
    }
    ++cycles;
  }
  // Streaming: a_reg moves right, p_reg moves down; both registers latch every cycle.
  std::vector<float> a_reg(size_t(S) * S, 0.0f), p_reg(size_t(S) * S, 0.0f);
  std::vector<float> a_next(a_reg.size()), p_next(p_reg.size());
  int64_t remaining = M * Nt;
  for (int64_t t = 0; remaining > 0; ++t) {
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) {
        const int64_t m = t - i - j;  // the row of A whose data is at PE(i, j) this cycle
        const bool valid = m >= 0 && m < M;
        float a_in = 0.0f;
        if (j == 0) {
          a_in = (valid && i < Kt) ? A[m * lda + i] : 0.0f;
        } else {
          a_in = a_reg[size_t(i) * S + j - 1];
        }
        float p_in = 0.0f;
        if (i == 0) {
          p_in = (valid && j < Nt && acc_in != nullptr) ? acc_in[m * ldo + j] : 0.0f;
        } else {
          p_in = p_reg[size_t(i - 1) * S + j];
        }
        a_next[size_t(i) * S + j] = a_in;
        p_next[size_t(i) * S + j] = p_in + a_in * w[size_t(i) * S + j];
        if (i == S - 1 && valid && j < Nt) {
          out[m * ldo + j] = p_next[size_t(i) * S + j];
          --remaining;
        }
      }
    }
    a_reg.swap(a_next);
    p_reg.swap(p_next);
    ++cycles;
  }
  return {cycles};
}

int64_t systolic_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K,
                        int64_t N, int S, Precision precision) {
  const auto a = split_all(A, M * K, precision);
  const auto b = split_all(B, K * N, precision);
  const PassPair* pairs = pass_pairs(precision);
  const int n_passes = passes(precision);
  int64_t cycles = 0;
  // partial[p] holds pass p's result for every output element.
  std::vector<std::vector<float>> partial(n_passes, std::vector<float>(size_t(M) * N));
  std::vector<float> chunk(size_t(M) * S), result(size_t(M) * S);
  for (int p = 0; p < n_passes; ++p) {
    const auto& ap = a[pairs[p].a_part];
    const auto& bp = b[pairs[p].b_part];
    for (int64_t n0 = 0; n0 < N; n0 += S) {
      const int64_t nt = std::min<int64_t>(S, N - n0);
      std::fill(result.begin(), result.end(), 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += S) {
        const int64_t kt = std::min<int64_t>(S, K - k0);
        cycles += systolic_tile(ap.data() + k0, K, bp.data() + k0 * N + n0, N, nullptr,
                                chunk.data(), S, M, kt, nt, S)
                      .cycles;
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t j = 0; j < nt; ++j) result[m * S + j] += chunk[m * S + j];
        }
      }
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < nt; ++j) partial[p][m * N + n0 + j] = result[m * S + j];
      }
    }
  }
  float passes_of_element[6];
  for (int64_t i = 0; i < M * N; ++i) {
    for (int p = 0; p < n_passes; ++p) passes_of_element[p] = partial[p][i];
    C[i] = combine_passes(passes_of_element, n_passes);
  }
  return cycles;
}

}  // namespace torchtpu::sim
