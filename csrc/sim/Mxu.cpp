#include "sim/Mxu.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/Parallel.h>
#include <ATen/ops/matmul.h>
#include <c10/util/Exception.h>

namespace torchtpu::sim {
namespace {

thread_local std::optional<Precision> tls_override;

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

// out = a @ b in fp32 with the passes of `precision` (see the header).
void float_matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                  Precision precision) {
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

Precision current_precision() {
  if (tls_override) return *tls_override;
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return Precision::kHighest;
    case at::Float32MatmulPrecision::HIGH: return Precision::kHigh;
    case at::Float32MatmulPrecision::MEDIUM: return Precision::kDefault;
  }
  return Precision::kHighest;
}

std::optional<Precision> precision_override() { return tls_override; }

void set_precision_override(std::optional<Precision> precision) { tls_override = precision; }

bool mxu_supports(c10::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf ||
         dtype == at::kChar;
}

int matmul_passes(c10::ScalarType dtype) {
  if (dtype == at::kFloat || dtype == at::kHalf) return passes(current_precision());
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
    default:
      TORCH_INTERNAL_ASSERT(false);
  }
}

Estimate matmul_estimate(int64_t batch, int64_t M, int64_t K, int64_t N, c10::ScalarType dtype,
                         double hbm) {
  const int bytes = static_cast<int>(c10::elementSize(dtype));
  if (mxu_supports(dtype)) {
    return cost_model().matmul(batch, M, K, N, matmul_passes(dtype), bytes, hbm,
                               dtype == at::kChar ? MxuRate::int8 : MxuRate::bf16);
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
