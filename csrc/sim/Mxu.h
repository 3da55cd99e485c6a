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
//   float32, highest  : 6 bf16 passes (XLA's bf16_6x, docs/precision.md): the operands split
//                       into hi = truncation to bf16, mid = bf16(x - hi), lo = bf16(x - hi -
//                       mid); each pass one host bf16 GEMM with float32 results (oneDNN's, or
//                       MKL's cblas_gemm_bf16bf16f32, which libtorch_cpu exports on x86-64;
//                       without them, float32 GEMMs of the parts), the passes added as
//                       combine_passes says: ((((mid*mid + hi*lo) + lo*hi) + hi*mid) + mid*hi)
//                       + hi*hi. With the opt-in highest_algorithm() == kFloat32, the host's
//                       float32 GEMM of the original operands instead (the CPU's result).
//   float32, high     : 3 passes (bf16_3x), the same way: (mid*hi + hi*mid) + hi*hi.
//   float32, medium   : 1 pass: bf16(a) @ bf16(b) rounded to nearest, products exact in fp32
//                       (one bf16 GEMM, or a float32 GEMM of the rounded operands).
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
// What differs from the MXU is only the order of the fp32 additions within each pass's sum over
// K (passes are added in the reference's order). The bound the tests check against the
// pass-by-pass reference (sim/Reference.h), per output element:
//   |fast - reference| <= 2 * K * 2^-24 * sum_k |a_k| |b_k|
#include "sim/CostModel.h"
#include "sim/Numerics.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

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
// libtpu's --xla_jf_conv_full_precision: every float32 matmul and convolution at "highest",
// whatever the default or a scope asks (torchtpu/_libtpu_flags.py sets it from
// LIBTPU_INIT_ARGS or an absl command line).
void set_full_precision(bool on);
bool full_precision_forced();

// What "highest" computes for float32 (and float16) operands, for the whole process: the chip's
// six bf16 passes (kBf16x6, the default), or the host CPU's float32 GEMM (kFloat32: PyTorch's
// CPU kernel on the host aliases, the CPU's result bit for bit), an opt-in for programs and
// tests that compare with the CPU and test something else than the MXU's numerics.
// TORCHTPU_HIGHEST_ALGORITHM (bf16_6x or float32) sets the starting value,
// torch.tpu.set_highest_algorithm(...) changes it (docs/precision.md).
enum class HighestAlgorithm { kBf16x6, kFloat32 };
HighestAlgorithm highest_algorithm();
void set_highest_algorithm(HighestAlgorithm algorithm);
const char* name(HighestAlgorithm algorithm);  // "bf16_6x", "float32"
HighestAlgorithm highest_algorithm_from_name(const std::string& name);
// True where float32 products at `precision` run as the host's float32 GEMM (the opt-in above).
inline bool host_float32(Precision precision) {
  return precision == Precision::kHighest && highest_algorithm() == HighestAlgorithm::kFloat32;
}

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

// The most floats of a multi-pass product's results one pass computes at once before they are
// added (32 Mi by default; more are computed in blocks of GEMMs or of rows): returns the
// previous value. For tests of the blocks.
int64_t set_partial_floats_budget(int64_t floats);

// The operand of a one-pass ("medium") float32 product: bf16(x), rounded to nearest, as float32
// (a contiguous result).
at::Tensor bf16_hi(const at::Tensor& x);

// The parts of a float32 host tensor as the multi-pass levels split it (split_bf16 in
// sim/Numerics.h), as float32 (contiguous results); kHiMid is hi + mid and kMidLo is mid + lo
// (x - hi), both exact in float32.
enum class Part { kHi, kMid, kLo, kHiMid, kMidLo };
at::Tensor bf16_part(const at::Tensor& x, Part part);

// The host products (part of a, part of b) that cover the passes of a multi-pass level with
// every product of parts exact in float32 (at most 8 x 16 significant bits), the last one hi*hi:
//   high:    mid(a)*hi(b), hi(a)*mid(b), hi(a)*hi(b)
//   highest: mid(a)*(hi+mid)(b), hi(a)*(mid+lo)(b), lo(a)*hi(b), hi(a)*hi(b)
struct PartPair {
  Part a, b;
};
const std::vector<PartPair>& grouped_passes(Precision precision);

// The products' float32 results added as combine_passes adds passes: the ones before the last in
// order, their sum's NaNs replaced by zero, then the last (hi*hi). Reuses the first tensor.
at::Tensor combine_partials(std::vector<at::Tensor>& partials);

// Any product that is bilinear in two float32 operands (a convolution) with the MXU passes of
// `precision`: `product(x, y)` is called on parts whose pairwise products are exact in float32
// and returns its float32 result; the results are combined as above:
//   highest: product(a, b) with the float32 opt-in (host_float32), else the four products of
//            grouped_passes (the six passes, grouped)
//   high:    the three passes of grouped_passes
//   medium:  product(bf16(a), bf16(b))
// The grouping adds the products of a pass pair in another order than the matmul's
// pass-by-pass sums: the results stay within the bound above.
template <typename Product>
at::Tensor bilinear_passes(const at::Tensor& a, const at::Tensor& b, Precision precision,
                           Product&& product) {
  if (precision == Precision::kDefault) return product(bf16_hi(a), bf16_hi(b));
  if (host_float32(precision)) return product(a, b);
  std::vector<at::Tensor> partials;
  for (const PartPair& pair : grouped_passes(precision)) {
    partials.push_back(product(bf16_part(a, pair.a), bf16_part(b, pair.b)));
  }
  return combine_partials(partials);
}

// The cost of a matmul launch with these operands and result.
// (Any dtype: one the MXU does not take is priced as if native and flagged.)
Estimate matmul_estimate(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);
// The same for [batch] x (M x K) @ (K x N) operands of `dtype` moving `hbm` padded bytes.
Estimate matmul_estimate(int64_t batch, int64_t M, int64_t K, int64_t N, c10::ScalarType dtype,
                         double hbm);

}  // namespace torchtpu::sim
