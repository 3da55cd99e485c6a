// Compiled with -mavx2 -mfma -ffp-contract=off (CMakeLists.txt): the loops below vectorize, and no
// multiply-add is contracted into an FMA (which would change rounding).
#include "defer/FusedLoop.h"

#include <algorithm>
#include <cmath>

namespace torchtpu::defer::loop {
namespace {

constexpr int64_t kTile = 256;

template <typename F>
inline void binary(float* __restrict o, const float* a, const float* b, float sa, float sb,
                   bool a_scalar, bool b_scalar, int64_t len, F f) {
  if (a_scalar) {
    for (int64_t i = 0; i < len; ++i) o[i] = f(sa, b[i]);
  } else if (b_scalar) {
    for (int64_t i = 0; i < len; ++i) o[i] = f(a[i], sb);
  } else {
    for (int64_t i = 0; i < len; ++i) o[i] = f(a[i], b[i]);
  }
}

}  // namespace

void run(const Instr* instrs, int count, float* const* ptrs, const float* scalars,
         const bool* is_scalar, int64_t n) {
  for (int64_t t = 0; t < n; t += kTile) {
    const int64_t len = std::min(kTile, n - t);
    for (int k = 0; k < count; ++k) {
      const Instr& in = instrs[k];
      float* o = ptrs[in.out] + t;
      const bool as = is_scalar[in.a];
      const float* a = as ? nullptr : ptrs[in.a] + t;
      const float sa = as ? scalars[in.a] : 0.f;
      const bool bs = in.b >= 0 && is_scalar[in.b];
      const float* b = (in.b < 0 || bs) ? nullptr : ptrs[in.b] + t;
      const float sb = bs ? scalars[in.b] : 0.f;
      switch (in.op) {
        case Op::add:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) { return x + y; });
          break;
        case Op::sub:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) { return x - y; });
          break;
        case Op::mul:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) { return x * y; });
          break;
        case Op::div:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) { return x / y; });
          break;
        case Op::maximum:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) {
            return (x != x || y != y) ? x + y : std::max(x, y);  // NaN propagates
          });
          break;
        case Op::minimum:
          binary(o, a, b, sa, sb, as, bs, len, [](float x, float y) {
            return (x != x || y != y) ? x + y : std::min(x, y);
          });
          break;
        case Op::clamp_min:  // clamp_min(a, scalar b): NaN stays NaN, as in ATen
          for (int64_t i = 0; i < len; ++i) o[i] = a[i] != a[i] ? a[i] : (a[i] < sb ? sb : a[i]);
          break;
        case Op::neg:
          for (int64_t i = 0; i < len; ++i) o[i] = -a[i];
          break;
        case Op::abs:
          for (int64_t i = 0; i < len; ++i) o[i] = std::fabs(a[i]);
          break;
        // (The three below: every operand a tensor entry. std::fma is one vfmadd here, which is
        // what ATen's vector kernels compute: vec::fmadd in lerp, a contracted multiply-add in
        // addcmul.)
        case Op::lerp: {
          const float w = in.s;
          if (std::fabs(w) < 0.5f) {
            for (int64_t i = 0; i < len; ++i) o[i] = std::fma(w, b[i] - a[i], a[i]);
          } else {
            const float w1 = w - 1.0f;
            for (int64_t i = 0; i < len; ++i) o[i] = std::fma(w1, b[i] - a[i], b[i]);
          }
          break;
        }
        case Op::addcmul: {
          const float v = in.s;
          const float* c = ptrs[in.c] + t;
          for (int64_t i = 0; i < len; ++i) o[i] = std::fma(v * b[i], c[i], a[i]);
          break;
        }
        case Op::addcdiv: {
          const float v = in.s;
          const float* c = ptrs[in.c] + t;
          for (int64_t i = 0; i < len; ++i) o[i] = a[i] + (v * b[i]) / c[i];
          break;
        }
      }
    }
  }
}

}  // namespace torchtpu::defer::loop
