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

// One pass over a float32 tensor: the bf16 part `part` (0 hi, 1 mid) or the prefix sum of parts
// 0..upto, computed by sim/Numerics in parallel blocks. The result is contiguous.
at::Tensor split_tensor(const at::Tensor& x, int index, bool prefix) {
  const at::Tensor src = x.contiguous();
  at::Tensor dst = at::empty(src.sizes(), src.options());
  const float* in = src.const_data_ptr<float>();
  float* out = dst.mutable_data_ptr<float>();
  at::parallel_for(0, src.numel(), 32768, [&](int64_t begin, int64_t end) {
    bf16_split(in + begin, out + begin, end - begin, index, prefix);
  });
  return dst;
}

// Writes the bf16 parts of x, a contiguous float32 [batch, R, C], as bf16 bits into dst: `count`
// 1 writes hi(x); 3 writes the parts the "high" passes multiply, in the order `parts_of_a` says
// ([hi, hi, mid] for the left operand, [hi, mid, hi] for the right one). They are laid side by
// side along the columns (dst [batch, R, count * C]) or along the rows (dst [batch, count * R, C]).
void write_parts(const at::Tensor& x, uint16_t* dst, int count, bool parts_of_a,
                 bool along_columns) {
  const float* src = x.const_data_ptr<float>();
  const int64_t R = x.size(1), C = x.size(2);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(C, 1));
  at::parallel_for(0, x.size(0) * R, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / R, r = row % R;
      auto part = [&](int j) {
        return along_columns ? dst + (row * count + j) * C : dst + ((b * count + j) * R + r) * C;
      };
      if (count == 1) {
        bf16_part_bits(src + row * C, C, part(0), nullptr, nullptr);
      } else if (parts_of_a) {
        bf16_part_bits(src + row * C, C, part(0), part(1), part(2));
      } else {
        bf16_part_bits(src + row * C, C, part(0), part(2), part(1));
      }
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

// GEMMs of fewer multiply-adds than this run on MKL's kernel (see run_gemms).
constexpr int64_t kOneDnnMinimum = int64_t(1) << 21;

// out = A @ B for bf16 bits a16 [A.size(0), M, Kp] and b16 [B.size(0), Kp, N], float32 sums.
void run_gemms(const Gemms& g, const uint16_t* a16, const uint16_t* b16, int64_t Kp,
               const at::Tensor& out) {
  const bool direct = out.is_contiguous() && out.scalar_type() == at::kFloat;
  at::Tensor C = direct ? out : at::empty(out.sizes(), out.options().dtype(at::kFloat));
  float* c = C.data_ptr<float>();
#ifdef TORCHTPU_ONEDNN
  // oneDNN's kernel where the CPU has a bf16 dot product: MKL's runs at the float32 GEMM's rate
  // on some CPUs (AMD's: 130 against oneDNN's 380 GFLOP/s, docs/host-speed.md). Small GEMMs
  // stay with MKL (a oneDNN call costs a few microseconds more).
  if (g.gemms * g.M * g.N * Kp >= kOneDnnMinimum && onednn::available() &&
      onednn::gemm_bf16_f32(g.gemms, g.A.size(0), g.B.size(0), g.M, g.N, Kp, a16, b16, c)) {
    TORCHTPU_COUNT("mxu.onednn_gemms");
    if (!direct) const_cast<at::Tensor&>(out).copy_(C);
    return;
  }
#endif
  constexpr int kRowMajor = 101, kNoTrans = 111;
  for (int64_t i = 0; i < g.gemms; ++i) {
    cblas_gemm_bf16bf16f32(kRowMajor, kNoTrans, kNoTrans, int(g.M), int(g.N), int(Kp), 1.0f,
                           a16 + (g.A.size(0) == 1 ? 0 : i) * g.M * Kp, int(Kp),
                           b16 + (g.B.size(0) == 1 ? 0 : i) * Kp * g.N, int(g.N), 0.0f,
                           c + i * g.M * g.N, int(g.N));
  }
  if (!direct) const_cast<at::Tensor&>(out).copy_(C);
}

// A buffer of n bf16 values for this thread's GEMM operands, kept between calls (a fresh one per
// call would cost a page fault per 4 KiB written); one over 64 MiB is replaced by the next call
// that needs less.
uint16_t* bf16_scratch(size_t n) {
  constexpr size_t kKept = size_t(32) << 20;  // values
  thread_local std::unique_ptr<uint16_t[]> buffer;
  thread_local size_t capacity = 0;
  if (n > capacity || (capacity > kKept && n <= kKept)) {
    buffer.reset(new uint16_t[n]);
    capacity = n;
  }
  return buffer.get();
}

// out = a @ b for float32 operands at "medium" or "high" in one host bf16 GEMM with float32
// results: the parts each pass multiplies laid side by side along the inner dimension (medium:
// hi(a) @ hi(b); high: [hi(a) hi(a) mid(a)] @ [hi(b); mid(b); hi(b)]), every product exact,
// sums in float32. False where it does not apply (no such GEMM in the library, shapes beyond
// 3-D or 32-bit sizes, a dot product): then the passes run as float32 GEMMs.
bool bf16_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
               Precision precision) {
  if (precision != Precision::kDefault && precision != Precision::kHigh) return false;
  const int count = precision == Precision::kHigh ? 3 : 1;
  const std::optional<Gemms> g = as_gemms(a, b, out, count);
  if (!g) return false;
  const int64_t Kp = count * g->K;
  const size_t a_elems = size_t(g->A.size(0) * g->M * Kp);
  uint16_t* a16 = bf16_scratch(a_elems + size_t(g->B.size(0) * Kp * g->N));
  uint16_t* b16 = a16 + a_elems;
  write_parts(g->A.contiguous(), a16, count, /*parts_of_a=*/true, /*along_columns=*/true);
  write_parts(g->B.contiguous(), b16, count, /*parts_of_a=*/false, /*along_columns=*/false);
  run_gemms(*g, a16, b16, Kp, out);
  return true;
}

// out = a @ b in fp32 with the passes of `precision` (see the header).
void float_matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                  Precision precision) {
  if (bf16_gemm(a, b, out, precision)) return;
  bilinear_passes(a, b, precision, [&](const at::Tensor& x, const at::Tensor& y, bool accumulate) {
    if (accumulate) {
      out.add_(at::matmul(x, y));
    } else {
      at::matmul_out(const_cast<at::Tensor&>(out), x, y);
    }
  });
}

}  // namespace

at::Tensor bf16_hi(const at::Tensor& x) { return split_tensor(x, 0, false); }
at::Tensor bf16_mid(const at::Tensor& x) { return split_tensor(x, 1, false); }
at::Tensor bf16_hi_mid(const at::Tensor& x) { return split_tensor(x, 1, true); }

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
              reinterpret_cast<const uint16_t*>(B.const_data_ptr()), g->K, out);
    return;
  }
  // (bf16 products are exact in float32: a float32 GEMM of the widened operands is the same)
  float_matmul(a.to(at::kFloat), b.to(at::kFloat), out, Precision::kHighest);
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
  if (tls_override) return *tls_override;
  return default_precision();
}

std::optional<Precision> precision_override() { return tls_override; }

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
