#include "sim/Mxu.h"
#include "sim/OneDnnGemm.h"
#include "runtime/Env.h"
#include "runtime/Metrics.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/Parallel.h>
#include <ATen/ops/matmul.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>

// MKL's bfloat16 GEMM with float32 results, which PyTorch's x86-64 CPU wheels link statically
// and export from libtorch_cpu. Declared weak: null where the library does not export it (then
// the passes run as float32 GEMMs). `layout` and the transposes are CBLAS's enum values.
extern "C" void cblas_gemm_bf16bf16f32(int layout, int transa, int transb, int m, int n, int k,
                                       float alpha, const uint16_t* a, int lda, const uint16_t* b,
                                       int ldb, float beta, float* c, int ldc)
    __attribute__((weak));

namespace torchtpu::sim {
namespace {

thread_local std::optional<Precision> tls_override;

// The process's precision outside a scope (see default_precision() in sim/Mxu.h); -1 until the
// first read, which takes TORCHTPU_MATMUL_PRECISION or TorchTPU's DEFAULT.
std::atomic<int> process_default{-1};

// "highest"'s algorithm for the process (see highest_algorithm() in sim/Mxu.h); -1 until the
// first read, which takes TORCHTPU_HIGHEST_ALGORITHM or bf16_6x.
std::atomic<int> process_highest{-1};

// libtpu's --xla_jf_conv_full_precision (see set_full_precision() in sim/Mxu.h).
std::atomic<bool> full_precision{false};

// rounded: bf16(x) for every element (the one-pass operand); else the multi-pass part `part`
// (bf16_split: 0 hi, 1 mid, 2 lo, with `prefix` / `suffix` sums of parts), computed by
// sim/Numerics in parallel blocks. The result is contiguous.
at::Tensor part_tensor(const at::Tensor& x, bool rounded, int part, bool prefix, bool suffix) {
  const at::Tensor src = x.contiguous();
  at::Tensor dst = at::empty(src.sizes(), src.options());
  const float* in = src.const_data_ptr<float>();
  float* out = dst.mutable_data_ptr<float>();
  at::parallel_for(0, src.numel(), 32768, [&](int64_t begin, int64_t end) {
    if (rounded) {
      round_bf16(in + begin, out + begin, end - begin);
    } else {
      bf16_split(in + begin, out + begin, end - begin, part, prefix, suffix);
    }
  });
  return dst;
}

// Writes the bf16 parts of the contiguous float32 x as bf16 bits, each part in a plane of
// x.numel() values: `count` 1 writes bf16(x) (rounded to nearest) to planes[0]; 2 or 3 write the
// multi-pass parts hi, mid (and lo) to planes[0..count).
void write_planes(const at::Tensor& x, uint16_t* const* planes, int count) {
  const float* src = x.const_data_ptr<float>();
  at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
    if (count == 1) {
      bf16_round_bits(src + begin, end - begin, planes[0] + begin);
    } else {
      bf16_split_bits(src + begin, end - begin, planes[0] + begin, planes[1] + begin,
                      count == 3 ? planes[2] + begin : nullptr);
    }
  });
}

// at::matmul's 1-D to 3-D cases as `gemms` GEMMs of A [1 or gemms, M, K] @ B [1 or gemms, K, N]
// into a float32 [gemms, M, N] (a right operand shared by every batch folds the batches into
// M: one GEMM).
struct Gemms {
  at::Tensor A, B;
  int64_t gemms = 0, M = 0, K = 0, N = 0;
};
std::optional<Gemms> as_gemms(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                              int k_parts) {
  if (cblas_gemm_bf16bf16f32 == nullptr || a.dim() > 3 || b.dim() > 3 ||
      (a.dim() == 1 && b.dim() == 1)) {
    return std::nullopt;
  }
  Gemms g;
  g.A = a.dim() == 1 ? a.unsqueeze(0) : a;  // [K] -> [1, K]
  g.B = b.dim() == 1 ? b.unsqueeze(1) : b;  // [K] -> [K, 1]
  if (g.A.dim() == 2) g.A = g.A.unsqueeze(0);
  if (g.B.dim() == 2) g.B = g.B.unsqueeze(0);
  const int64_t batch = std::max(g.A.size(0), g.B.size(0));
  if ((g.A.size(0) != batch && g.A.size(0) != 1) || (g.B.size(0) != batch && g.B.size(0) != 1) ||
      g.A.size(2) != g.B.size(1)) {
    return std::nullopt;
  }
  if (g.B.size(0) == 1 && batch > 1) g.A = g.A.reshape({1, batch * g.A.size(1), g.A.size(2)});
  g.gemms = std::max(g.A.size(0), g.B.size(0));
  g.M = g.A.size(1), g.K = g.A.size(2), g.N = g.B.size(2);
  if (g.M > INT_MAX || g.N > INT_MAX || k_parts * g.K > INT_MAX ||
      g.gemms * g.M * g.N != out.numel()) {
    return std::nullopt;
  }
  return g;
}

// GEMMs of fewer multiply-adds than this run on MKL's kernel (see gemm_bf16).
constexpr int64_t kOneDnnMinimum = int64_t(1) << 21;

// c[i] = a[i] @ b[i] for i < count, float32 sums of exact bf16 products: a[i] = a + i * a_step
// ([M, K] bf16 bits, row-major), b[i] = b + i * b_step ([K, N]), c[i] = c + i * M * N (float32,
// row-major). A step of 0 shares the operand between the GEMMs.
void gemm_bf16(int64_t count, const uint16_t* a, int64_t a_step, const uint16_t* b,
               int64_t b_step, int64_t M, int64_t N, int64_t K, float* c) {
#ifdef TORCHTPU_ONEDNN
  // oneDNN's kernel where the CPU has a bf16 dot product: MKL's runs at the float32 GEMM's rate
  // on some CPUs (AMD's: 130 against oneDNN's 380 GFLOP/s, docs/host-speed.md). Small GEMMs
  // stay with MKL (a oneDNN call costs a few microseconds more).
  if (count * M * N * K >= kOneDnnMinimum && onednn::available() &&
      onednn::gemm_bf16_f32(count, a_step == 0 ? 1 : count, b_step == 0 ? 1 : count, M, N, K, a,
                            b, c)) {
    TORCHTPU_COUNT("mxu.onednn_gemms");
    return;
  }
#endif
  constexpr int kRowMajor = 101, kNoTrans = 111;
  for (int64_t i = 0; i < count; ++i) {
    cblas_gemm_bf16bf16f32(kRowMajor, kNoTrans, kNoTrans, int(M), int(N), int(K), 1.0f,
                           a + i * a_step, int(K), b + i * b_step, int(N), 0.0f, c + i * M * N,
                           int(N));
  }
}

// out = A @ B for bf16 bits a16 [A.size(0), M, K] and b16 [B.size(0), K, N], float32 sums.
void run_gemms(const Gemms& g, const uint16_t* a16, const uint16_t* b16, const at::Tensor& out) {
  const bool direct = out.is_contiguous() && out.scalar_type() == at::kFloat;
  at::Tensor C = direct ? out : at::empty(out.sizes(), out.options().dtype(at::kFloat));
  gemm_bf16(g.gemms, a16, g.A.size(0) == 1 ? 0 : g.M * g.K, b16, g.B.size(0) == 1 ? 0 : g.K * g.N,
            g.M, g.N, g.K, C.data_ptr<float>());
  if (!direct) const_cast<at::Tensor&>(out).copy_(C);
}

// A buffer of n values of T for this thread, kept between calls (a fresh one per call would cost
// a page fault per 4 KiB written); one over 32 Mi values is replaced by the next call that needs
// less.
template <typename T>
T* scratch(size_t n) {
  constexpr size_t kKept = size_t(32) << 20;  // values
  thread_local std::unique_ptr<T[]> buffer;
  thread_local size_t capacity = 0;
  if (n > capacity || (capacity > kKept && n <= kKept)) {
    buffer.reset(new T[n]);
    capacity = n;
  }
  return buffer.get();
}

// out[i] = out[i] + add[i] for i < n, the sum's NaNs replaced by zero where `drop_nans` (the
// last of the passes before hi*hi: combine_passes).
void add_into(float* out, const float* add, int64_t n, bool drop_nans) {
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    // (a loop per case, with no branch on the case inside, so that each vectorizes)
    if (drop_nans) {
      for (int64_t i = begin; i < end; ++i) {
        const float sum = out[i] + add[i];
        out[i] = std::isnan(sum) ? 0.0f : sum;
      }
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = out[i] + add[i];
    }
  });
}

// A pass's float32 results go to a buffer of at most this many floats before they are added to
// the result: a matmul whose GEMMs need more runs in blocks of its GEMMs, or of equal blocks of
// rows of one GEMM. Buffers up to kKeptPartialFloats are kept per thread between calls; larger
// ones are allocated for the call. (With every pass but hi*hi in a buffer of its own, added by
// one loop, a 16 MiB budget made the (8, 2048, 2048) product at "highest" run in blocks of 409
// rows, 1.8 times as long as in whole GEMMs.)
std::atomic<int64_t> partial_floats_budget{int64_t(32) << 20};  // 128 MiB
constexpr int64_t kKeptPartialFloats = int64_t(1) << 20;        // 4 MiB

// out = a @ b for float32 operands at "medium" in one host bf16 GEMM with float32 results of the
// rounded operands, bf16(a) @ bf16(b), every product exact, sums in float32. False where it does
// not apply (no such GEMM in the library, shapes beyond 3-D or 32-bit sizes, a dot product).
bool one_pass_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  const std::optional<Gemms> g = as_gemms(a, b, out, 1);
  if (!g) return false;
  const size_t a_elems = size_t(g->A.size(0) * g->M * g->K);
  uint16_t* a16 = scratch<uint16_t>(a_elems + size_t(g->B.size(0) * g->K * g->N));
  uint16_t* b16 = a16 + a_elems;
  write_planes(g->A.contiguous(), &a16, 1);
  write_planes(g->B.contiguous(), &b16, 1);
  run_gemms(*g, a16, b16, out);
  return true;
}

// out = a @ b for float32 operands at "high" or "highest", pass by pass: the operands' parts
// written once as bf16 planes, each pass one bf16 GEMM with float32 results, added to the result
// in the passes' order (combine_passes): the first pass into the result, each later one into a
// buffer, then added. False where the GEMM does not apply (as one_pass_gemm).
bool multi_pass_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                     Precision precision) {
  const int count = precision == Precision::kHighest ? 3 : 2;  // parts per operand
  const int n_passes = passes(precision);
  const PassPair* pairs = pass_pairs(precision);
  const std::optional<Gemms> g = as_gemms(a, b, out, 1);
  if (!g) return false;
  const int64_t M = g->M, K = g->K, N = g->N;
  const int64_t a_plane = g->A.size(0) * M * K, b_plane = g->B.size(0) * K * N;
  uint16_t* a16 = scratch<uint16_t>(size_t(count) * (a_plane + b_plane));
  uint16_t* b16 = a16 + count * a_plane;
  uint16_t* a_parts[3] = {a16, a16 + a_plane, a16 + 2 * a_plane};
  uint16_t* b_parts[3] = {b16, b16 + b_plane, b16 + 2 * b_plane};
  write_planes(g->A.contiguous(), a_parts, count);
  write_planes(g->B.contiguous(), b_parts, count);

  const bool direct = out.is_contiguous() && out.scalar_type() == at::kFloat;
  at::Tensor C = direct ? out : at::empty(out.sizes(), out.options().dtype(at::kFloat));
  float* c = C.data_ptr<float>();
  // Blocks: several whole GEMMs where their results fit the buffer, else equal blocks of rows.
  const int64_t budget = partial_floats_budget.load(std::memory_order_relaxed);
  const int64_t per_gemm = M * N;
  const int64_t gemms_per_block = std::max<int64_t>(1, budget / std::max<int64_t>(per_gemm, 1));
  const int64_t row_blocks = per_gemm <= budget ? 1 : (per_gemm + budget - 1) / budget;
  const int64_t rows_per_block = (M + row_blocks - 1) / row_blocks;
  const size_t buffer_floats = size_t(std::min(gemms_per_block, g->gemms) * rows_per_block * N);
  std::unique_ptr<float[]> own;
  float* buffer = nullptr;
  if (int64_t(buffer_floats) <= kKeptPartialFloats) {
    buffer = scratch<float>(buffer_floats);
  } else {
    own.reset(new float[buffer_floats]);
    buffer = own.get();
  }
  const int64_t a_step = g->A.size(0) == 1 ? 0 : M * K, b_step = g->B.size(0) == 1 ? 0 : K * N;
  for (int64_t g0 = 0; g0 < g->gemms; g0 += gemms_per_block) {
    const int64_t gemms = std::min(gemms_per_block, g->gemms - g0);
    for (int64_t r0 = 0; r0 < M; r0 += rows_per_block) {
      const int64_t rows = std::min(rows_per_block, M - r0);
      const int64_t block = gemms * rows * N;  // (rows < M only with one GEMM per block)
      float* result = c + g0 * M * N + r0 * N;
      for (int p = 0; p < n_passes; ++p) {
        gemm_bf16(gemms, a_parts[pairs[p].a_part] + g0 * a_step + r0 * K, a_step,
                  b_parts[pairs[p].b_part] + g0 * b_step, b_step, rows, N, K,
                  p == 0 ? result : buffer);
        if (p > 0) add_into(result, buffer, block, /*drop_nans=*/p == n_passes - 2);
      }
    }
  }
  if (!direct) const_cast<at::Tensor&>(out).copy_(C);
  return true;
}

// out = a @ b in fp32 with the passes of `precision` (see the header).
void float_matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                  Precision precision) {
  if (host_float32(precision)) {
    at::matmul_out(const_cast<at::Tensor&>(out), a, b);
    return;
  }
  if (precision == Precision::kDefault) {
    if (one_pass_gemm(a, b, out)) return;
    at::matmul_out(const_cast<at::Tensor&>(out), bf16_hi(a), bf16_hi(b));
    return;
  }
  if (multi_pass_gemm(a, b, out, precision)) return;
  // Without the library's bf16 GEMM (or for shapes it does not take): each pass a float32 GEMM of
  // the parts, whose products are exact, added in the passes' order.
  const PassPair* pairs = pass_pairs(precision);
  const Part parts[3] = {Part::kHi, Part::kMid, Part::kLo};
  std::vector<at::Tensor> partials;
  for (int p = 0; p < passes(precision); ++p) {
    partials.push_back(at::matmul(bf16_part(a, parts[pairs[p].a_part]),
                                  bf16_part(b, parts[pairs[p].b_part])));
  }
  const_cast<at::Tensor&>(out).copy_(combine_partials(partials));
}

}  // namespace

int64_t set_partial_floats_budget(int64_t floats) {
  TORCH_CHECK(floats > 0, "the partial results' budget must be positive");
  return partial_floats_budget.exchange(floats);
}

at::Tensor bf16_hi(const at::Tensor& x) { return part_tensor(x, true, 0, false, false); }

at::Tensor bf16_part(const at::Tensor& x, Part part) {
  switch (part) {
    case Part::kHi: return part_tensor(x, false, 0, false, false);
    case Part::kMid: return part_tensor(x, false, 1, false, false);
    case Part::kLo: return part_tensor(x, false, 2, false, false);
    case Part::kHiMid: return part_tensor(x, false, 1, true, false);
    case Part::kMidLo: return part_tensor(x, false, 1, false, true);
  }
  TORCH_INTERNAL_ASSERT(false);
}

const std::vector<PartPair>& grouped_passes(Precision precision) {
  static const std::vector<PartPair> high = {
      {Part::kMid, Part::kHi}, {Part::kHi, Part::kMid}, {Part::kHi, Part::kHi}};
  // mid*hi + mid*mid, hi*mid + hi*lo, lo*hi, then hi*hi: the six passes.
  static const std::vector<PartPair> highest = {{Part::kMid, Part::kHiMid},
                                                {Part::kHi, Part::kMidLo},
                                                {Part::kLo, Part::kHi},
                                                {Part::kHi, Part::kHi}};
  TORCH_CHECK(precision != Precision::kDefault, "grouped_passes: one pass at 'medium'");
  return precision == Precision::kHigh ? high : highest;
}

at::Tensor combine_partials(std::vector<at::Tensor>& partials) {
  TORCH_INTERNAL_ASSERT(!partials.empty());
  if (partials.size() == 1) return partials[0];
  at::Tensor sum = partials[0];
  for (size_t i = 1; i + 1 < partials.size(); ++i) sum.add_(partials[i]);
  sum.masked_fill_(sum.isnan(), 0.0);
  return sum.add_(partials.back());
}

const char* name(HighestAlgorithm algorithm) {
  return algorithm == HighestAlgorithm::kFloat32 ? "float32" : "bf16_6x";
}

HighestAlgorithm highest_algorithm_from_name(const std::string& name) {
  if (name == "bf16_6x") return HighestAlgorithm::kBf16x6;
  if (name == "float32") return HighestAlgorithm::kFloat32;
  TORCH_CHECK_VALUE(false, "the 'highest' matmul algorithm must be 'bf16_6x' (the chip's six bf16 "
                    "passes) or 'float32' (the host CPU's float32 GEMM), got '", name, "'");
}

HighestAlgorithm highest_algorithm() {
  int value = process_highest.load(std::memory_order_relaxed);
  if (value < 0) {
    HighestAlgorithm algorithm = HighestAlgorithm::kBf16x6;
    if (auto name = runtime::env::get("TORCHTPU_HIGHEST_ALGORITHM")) {
      TORCH_CHECK_VALUE(*name == "bf16_6x" || *name == "float32",
                        "TORCHTPU_HIGHEST_ALGORITHM must be bf16_6x or float32, got '", *name, "'");
      algorithm = highest_algorithm_from_name(*name);
    }
    int expected = -1;
    process_highest.compare_exchange_strong(expected, static_cast<int>(algorithm));
    value = process_highest.load(std::memory_order_relaxed);
  }
  return static_cast<HighestAlgorithm>(value);
}

void set_highest_algorithm(HighestAlgorithm algorithm) {
  process_highest.store(static_cast<int>(algorithm), std::memory_order_relaxed);
}

void matmul_bf16_to_float(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 &&
                  out.scalar_type() == at::kFloat,
              "matmul_bf16_to_float takes bfloat16 operands and a float32 result");
  if (a.numel() == 0 || b.numel() == 0) {
    const_cast<at::Tensor&>(out).zero_();
    return;
  }
  if (const std::optional<Gemms> g = as_gemms(a, b, out, 1)) {
    const at::Tensor A = g->A.contiguous(), B = g->B.contiguous();
    run_gemms(*g, reinterpret_cast<const uint16_t*>(A.const_data_ptr()),
              reinterpret_cast<const uint16_t*>(B.const_data_ptr()), out);
    return;
  }
  // (bf16 products are exact in float32: a float32 GEMM of the widened operands is the same)
  at::matmul_out(const_cast<at::Tensor&>(out), a.to(at::kFloat), b.to(at::kFloat));
}

Precision default_precision() {
  int level = process_default.load(std::memory_order_relaxed);
  if (level < 0) {
    Precision p = Precision::kDefault;
    if (auto name = runtime::env::get("TORCHTPU_MATMUL_PRECISION")) {
      TORCH_CHECK_VALUE(*name == "medium" || *name == "high" || *name == "highest",
                        "TORCHTPU_MATMUL_PRECISION must be medium, high or highest, got '",
                        *name, "'");
      p = precision_from_name(*name);
    }
    int expected = -1;
    process_default.compare_exchange_strong(expected, static_cast<int>(p));
    level = process_default.load(std::memory_order_relaxed);
  }
  return static_cast<Precision>(level);
}

void set_default_precision(Precision precision) {
  process_default.store(static_cast<int>(precision), std::memory_order_relaxed);
}

Precision current_precision() {
  if (full_precision.load(std::memory_order_relaxed)) return Precision::kHighest;
  if (tls_override) return *tls_override;
  return default_precision();
}

std::optional<Precision> precision_override() { return tls_override; }

void set_full_precision(bool on) { full_precision.store(on, std::memory_order_relaxed); }
bool full_precision_forced() { return full_precision.load(std::memory_order_relaxed); }

void set_precision_override(std::optional<Precision> precision) { tls_override = precision; }

int int8_limbs(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kChar:
    case at::kByte:
      return 1;
    case at::kShort:
      return 2;
    case at::kInt:
      return 4;
    case at::kLong:
      return 8;
    default:
      return 0;
  }
}

bool mxu_supports(c10::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf ||
         int8_limbs(dtype) > 0;
}

int matmul_passes(c10::ScalarType dtype) {
  if (dtype == at::kFloat || dtype == at::kHalf) return passes(current_precision());
  const int limbs = int8_limbs(dtype);
  if (limbs > 1) return limbs * (limbs + 1) / 2;  // the limb pairs i + j < limbs
  return 1;
}

void matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, Precision precision) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected both operands to have the same dtype, but got ",
              a.scalar_type(), " and ", b.scalar_type());
  const auto dtype = a.scalar_type();
  TORCH_CHECK(mxu_supports(dtype), "the MXU does not execute ", dtype, " matmuls");
  if (a.numel() == 0 || b.numel() == 0) {
    out.zero_();
    return;
  }
  switch (dtype) {
    case at::kBFloat16:
      at::matmul_out(const_cast<at::Tensor&>(out), a, b);
      return;
    case at::kFloat:
      float_matmul(a, b, out, precision);
      return;
    case at::kHalf: {
      at::Tensor result = at::empty(out.sizes(), out.options().dtype(at::kFloat));
      float_matmul(a.to(at::kFloat), b.to(at::kFloat), result, precision);
      out.copy_(result);
      return;
    }
    case at::kChar: {
      // Exact int32 accumulation; an int8 result wraps modulo 256 as PyTorch's CPU kernel does.
      at::Tensor result = at::matmul(a.to(at::kInt), b.to(at::kInt));
      out.copy_(result);
      return;
    }
    case at::kByte:
    case at::kShort:
    case at::kInt:
    case at::kLong:
      // The int8 limb passes give the product modulo 2^bits exactly (see the header), which is
      // what PyTorch's CPU GEMM of the type computes, its sums wrapping: that GEMM.
      at::matmul_out(const_cast<at::Tensor&>(out), a, b);
      return;
    default:
      TORCH_INTERNAL_ASSERT(false);
  }
}

Estimate matmul_estimate(int64_t batch, int64_t M, int64_t K, int64_t N, c10::ScalarType dtype,
                         double hbm) {
  const int bytes = static_cast<int>(c10::elementSize(dtype));
  const int limbs = int8_limbs(dtype);
  if (limbs > 0) {
    // int8 passes at the int8 rate (the MXU streams int8 limbs, 1 byte each); wider integers
    // add the VPU work of the emulation: each operand element split into its limbs (a unit per
    // limb) and each result element summed from its passes' int32 partial products, shifted
    // (a unit per pass).
    const auto& model = cost_model();
    const int passes = matmul_passes(dtype);
    Estimate e = model.matmul(batch, M, K, N, passes, 1, hbm, MxuRate::int8);
    if (limbs == 1) return e;
    e = model.combine(e, model.vector(batch * M * K + batch * K * N, limbs, 0));
    return model.combine(e, model.vector(batch * M * N, passes, 0));
  }
  if (mxu_supports(dtype)) {
    return cost_model().matmul(batch, M, K, N, matmul_passes(dtype), bytes, hbm, MxuRate::bf16);
  }
  // A dtype the MXU does not take (the op runs on the host): priced as if native, and flagged.
  // fp8 at the chip's fp8 rate; float64 as float32 at "highest" (6 bf16 passes), complex as
  // four real products (assumptions: docs/insight.md).
  int passes = 1;
  MxuRate rate = MxuRate::bf16;
  if (dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2 || dtype == at::kFloat8_e4m3fnuz ||
      dtype == at::kFloat8_e5m2fnuz) {
    rate = MxuRate::fp8;
  } else if (dtype == at::kDouble) {
    passes = 6;
  } else if (dtype == at::kComplexFloat) {
    passes = 4 * sim::passes(current_precision());
  } else if (dtype == at::kComplexDouble) {
    passes = 4 * 6;
  }
  Estimate e = cost_model().matmul(batch, M, K, N, passes, bytes, hbm, rate);
  e.work.priced_as_native = true;
  return e;
}

Estimate matmul_estimate(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  // Canonical [batch, M, K] x [batch?, K, N] view of the operands.
  const int64_t K = a.dim() == 0 ? 1 : a.size(-1);
  const int64_t M = a.dim() >= 2 ? a.size(-2) : 1;
  const int64_t N = b.dim() >= 2 ? b.size(-1) : 1;
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < std::max<int64_t>(a.dim(), b.dim()); ++d) {
    const auto& bigger = a.dim() >= b.dim() ? a : b;
    batch *= bigger.size(d);
  }
  const int bytes = static_cast<int>(a.element_size());
  const double hbm = CostModel::padded_bytes(a.sizes(), bytes) +
                     CostModel::padded_bytes(b.sizes(), bytes) +
                     CostModel::padded_bytes(out.sizes(), static_cast<int>(out.element_size()));
  return matmul_estimate(batch, M, K, N, a.scalar_type(), hbm);
}

}  // namespace torchtpu::sim
