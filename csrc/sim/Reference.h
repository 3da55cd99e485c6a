#pragma once
// Reference models of the MXU, for tests and for checking the fast executor: slow, exact in
// their definition, on plain row-major float buffers.
#include "sim/Numerics.h"

#include <cstdint>

namespace torchtpu::sim {

// C[M,N] = A[M,K] @ B[K,N], pass by pass, as docs/design.md 4.2 defines the MXU numerics:
//  - operands are split into bf16 parts (bf16 operands have only a "hi" part: pass bf16 values
//    with precision kDefault);
//  - K is cut into chunks of the MXU width `mxu_dim`; within a chunk one fp32 accumulator
//    receives every pass's products in order (k ascending within a pass, passes in the order
//    of pass_pairs), each product exact;
//  - the chunk accumulators are summed in fp32, chunk 0 first.
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

// A whole matmul on one systolic array, tile by tile (N chunks outer, K chunks inner, passes
// innermost, each pass's tile taking the running accumulator of its chunk as acc_in), with the
// numerics of reference_matmul. Returns the total cycles, tiles run back to back.
int64_t systolic_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K,
                        int64_t N, int S, Precision precision);

}  // namespace torchtpu::sim
