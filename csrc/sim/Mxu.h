#pragma once
// The MXU executor: matrix products on host tensors with the TPU's numerics (docs/design.md 4.2).
//
// sim/ never sees TPU tensors or the dispatcher's PrivateUse1 kernels: the aten layer hands it
// CPU tensors (host aliases of device memory), and it uses PyTorch's CPU kernels as its host
// math library. The products themselves run on PyTorch's tuned CPU GEMM (oneDNN / MKL) on
// operands prepared so that every product the MXU would form is represented exactly:
//
//   bfloat16 operands : one pass; the host bf16 GEMM multiplies exactly and accumulates in
//                       fp32, rounding once to bf16 at the end, as the MXU does.
//   float32, highest  : 6 bf16 passes. Equal to an fp32 GEMM of the original operands up to
//                       the dropped terms mid*lo + lo*mid + lo*lo (below 2^-32 relative).
//   float32, high     : 3 passes, run as one host bf16 GEMM with float32 results whose inner
//                       dimension holds the three: [hi(a) hi(a) mid(a)] @ [hi(b); mid(b); hi(b)]
//                       (MKL's cblas_gemm_bf16bf16f32, which libtorch_cpu exports on x86-64;
//                       without it, 2 float32 GEMMs: hi(a) @ (hi+mid)(b) + mid(a) @ hi(b)).
//   float32, medium   : 1 pass: bf16(a) @ bf16(b), products exact in fp32 (the same bf16 GEMM,
//                       or a float32 GEMM of the rounded operands).
//   float16 operands  : converted to float32 exactly, then as float32 at the current precision,
//                       the result rounded to float16.
//   int8 operands     : int8 x int8 products accumulated exactly in int32.
//   other integers    : (uint8, int16, int32, int64) emulated in int8 passes, as the MXU
//                       multiplies no wider integer: each operand is split into n signed-byte
//                       limbs (balanced base 256: digits in [-128, 127], n = the type's bytes)
//                       and the pass of limbs i and j, shifted by 8(i + j) bits, is needed only
//                       for i + j < n, the others vanishing modulo 2^(8n): n(n + 1) / 2 passes
//                       (uint8 1, int16 3, int32 10, int64 36), exact modulo 2^(8n) with each
//                       pass's sums in the int32 accumulator (wrapping is harmless up to
//                       int32; int64 needs them exact: below 2^31 for K < 2^17, longer K in
//                       chunks, combined in 64 bits on the VPU). That is the wrapping result
//                       PyTorch's CPU GEMM of the type gives, which the host runs.
//
// What differs from the MXU is only the order of the fp32 additions. The bound the tests
// check against the pass-by-pass reference (sim/Reference.h), per output element:
//   |fast - reference| <= 2 * K * 2^-24 * sum_k |a_k| |b_k|   (+ the dropped terms at highest)
#include "sim/CostModel.h"
#include "sim/Numerics.h"

#include <ATen/core/Tensor.h>

#include <optional>

namespace torchtpu::sim {

// The precision in force on this thread: the override of torch.tpu.precision(...) if set,
// else the process's default.
Precision current_precision();
// The process's float32 matmul precision outside torch.tpu.precision scopes: TorchTPU's DEFAULT
// (one bfloat16 pass, as the chip runs an unscoped float32 matmul) unless the environment's
// TORCHTPU_MATMUL_PRECISION names another; torch.set_float32_matmul_precision(...) sets it
// (torchtpu/tpu.py), PyTorch's own setting for the CPU is not read.
Precision default_precision();
void set_default_precision(Precision precision);
std::optional<Precision> precision_override();
void set_precision_override(std::optional<Precision> precision);

// The MXU passes a matmul of this dtype takes at the current precision (integers: int8 passes).
int matmul_passes(c10::ScalarType dtype);

// The int8 limbs of an integer matmul's operands on the MXU: 1 for int8 and uint8, 2 for int16,
// 4 for int32, 8 for int64; 0 for other dtypes.
int int8_limbs(c10::ScalarType dtype);

// True for the dtypes the MXU executes: float32, bfloat16, float16, int8, and uint8, int16, int32
// and int64 in int8 passes.
bool mxu_supports(c10::ScalarType dtype);

// out = a @ b for host tensors of a supported dtype: 1-D/2-D/3-D as at::matmul. `out` has the
// result's shape and dtype: the operands' dtype, or int32 for int8 operands (_int_mm).
// `precision` applies to float32 and float16 operands (pass current_precision() of the thread
// that issued the op).
void matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, Precision precision);

// out (float32) = a @ b for bfloat16 host operands (1-D to 3-D as at::matmul): products exact,
// sums in float32, no final rounding (the MXU's accumulator, before an epilogue rounds it).
void matmul_bf16_to_float(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);

// The bf16 parts of a float32 host tensor (contiguous results): hi = bf16(x), mid = bf16(x -
// hi), and hi + mid (exact in float32: 16 significant bits).
at::Tensor bf16_hi(const at::Tensor& x);
at::Tensor bf16_mid(const at::Tensor& x);
at::Tensor bf16_hi_mid(const at::Tensor& x);

// Any product that is bilinear in two float32 operands (a matmul, a convolution) with the MXU
// passes of `precision`: `product(x, y)` is called on bf16 parts whose pairwise products are
// exact in float32, and the partial results are summed:
//   highest: product(a, b)   (the six passes up to terms below 2^-32 relative)
//   high:    product(hi(a), (hi+mid)(b)) + product(mid(a), hi(b))
//   medium:  product(hi(a), hi(b))
// `accumulate` is false for the first call and true for later ones: the callee either writes
// its result or adds it to the one it wrote.
template <typename Product>
void bilinear_passes(const at::Tensor& a, const at::Tensor& b, Precision precision,
                     Product&& product) {
  switch (precision) {
    case Precision::kHighest:
      product(a, b, false);
      return;
    case Precision::kHigh:
      product(bf16_hi(a), bf16_hi_mid(b), false);
      product(bf16_mid(a), bf16_hi(b), true);
      return;
    case Precision::kDefault:
      product(bf16_hi(a), bf16_hi(b), false);
      return;
  }
}

// The cost of a matmul launch with these operands and result.
// (Any dtype: one the MXU does not take is priced as if native and flagged.)
Estimate matmul_estimate(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);
// The same for [batch] x (M x K) @ (K x N) operands of `dtype` moving `hbm` padded bytes.
Estimate matmul_estimate(int64_t batch, int64_t M, int64_t K, int64_t N, c10::ScalarType dtype,
                         double hbm);

}  // namespace torchtpu::sim
