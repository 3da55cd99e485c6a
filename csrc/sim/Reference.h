#pragma once
// Reference models of the MXU, for tests and for checking the fast executor: slow, exact in
// their definition, on plain row-major float buffers.
#include "sim/Numerics.h"

#include <cstdint>

namespace torchtpu::sim {

// C[M,N] = A[M,K] @ B[K,N], pass by pass, as docs/precision.md defines the MXU numerics:
//  - operands are split into bf16 parts (operand_part: kDefault rounds to the nearest bf16, the
//    multi-pass levels split as split_bf16; bf16 operands have only a "hi" part: pass bf16
//    values with precision kDefault);
//  - each pass (pass_pairs) is a product summed over K on its own: K is cut into chunks of the
//    MXU width `mxu_dim`, within a chunk one fp32 accumulator receives the pass's exact
//    products, k ascending, and the chunk accumulators are summed in fp32, chunk 0 first;
//  - the passes' results are added as combine_passes says (the smaller passes in order, a NaN
//    among them dropped, hi*hi last).
void reference_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                      int mxu_dim, Precision precision);

// A weight-stationary S x S systolic array, stepped cycle by cycle.
//
// PE(i, j) holds weight W[i][j] (i along K, j along N). Weights are shifted in from the top, one
// row per cycle, S cycles for the whole array (rows past Kt hold zeros). Then row m of A enters
// array row i at stream cycle m + i (skewed), moves one PE to the right per cycle, and the
// partial sum of output (m, j) moves one PE down per cycle, PE(i, j) adding a*w in fp32 at
// stream cycle m + i + j. Output (m, j) leaves the bottom row (S - 1) at stream cycle
// m + (S - 1) + j. The run ends when the last output has left.
struct SystolicResult {
  int64_t cycles;  // weight load + streaming, until the last output left the array
};

// out[m][j] = acc_in[m][j] + sum_i A[m][i] * W[i][j] for m < M, i < Kt, j < Nt (Kt, Nt <= S).
// acc_in may be null (zeros). Leading dimensions in elements.
SystolicResult systolic_tile(const float* A, int64_t lda, const float* W, int64_t ldw,
                             const float* acc_in, float* out, int64_t ldo, int64_t M, int64_t Kt,
                             int64_t Nt, int S);

// A whole matmul on one systolic array, tile by tile (passes outer, then N chunks, K chunks
// inner, each tile starting from a zero accumulator), with the numerics of reference_matmul.
// Returns the total cycles, tiles run back to back.
int64_t systolic_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K,
                        int64_t N, int S, Precision precision);

}  // namespace torchtpu::sim
