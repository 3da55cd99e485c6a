#pragma once
// The bfloat16 GEMM with float32 results of oneDNN (Debian's libdnnl), behind a plain interface:
// this file and OneDnnGemm.cpp never see torch's headers (torch ships the headers of the oneDNN
// it links statically, another version, under the same names), like the logging library.
// Used by the simulated MXU (Mxu.cpp) for its bf16 passes where it is faster than MKL's
// (docs/host-speed.md, "GEMMs on oneDNN").
#include <cstdint>

namespace torchtpu::sim::onednn {

// Whether the library is there and runs on this CPU.
bool available();

// c[i] = a[i or 0] @ b[i or 0] for i < batch: a [batch_a, M, K] and b [batch_b, K, N] bf16 bits,
// row-major and contiguous; c [batch, M, N] float32 (batch_a and batch_b are batch or 1). Every
// product exact, sums in float32. False where the library refuses the shapes (the caller runs
// the GEMM another way).
bool gemm_bf16_f32(int64_t batch, int64_t batch_a, int64_t batch_b, int64_t M, int64_t N,
                   int64_t K, const uint16_t* a, const uint16_t* b, float* c);

}  // namespace torchtpu::sim::onednn
