#include "sim/Numerics.h"

#include <c10/util/Exception.h>

namespace torchtpu::sim {

int passes(Precision p) {
  switch (p) {
    case Precision::kDefault: return 1;
    case Precision::kHigh: return 3;
    case Precision::kHighest: return 6;
  }
  return 6;
}

const char* name(Precision p) {
  switch (p) {
    case Precision::kDefault: return "medium";
    case Precision::kHigh: return "high";
    case Precision::kHighest: return "highest";
  }
  return "highest";
}

Precision precision_from_name(const std::string& torch_name) {
  if (torch_name == "medium") return Precision::kDefault;
  if (torch_name == "high") return Precision::kHigh;
  if (torch_name == "highest") return Precision::kHighest;
  TORCH_CHECK(false, "Unknown matmul precision '", torch_name,
              "'; expected 'highest', 'high' or 'medium'");
}

const PassPair* pass_pairs(Precision p) {
  static const PassPair pairs[6] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {2, 0}};
  (void)p;  // the first passes(p) entries are the ones used
  return pairs;
}

// The buffer loops are written as straight-line bit operations on each element so that the
// compiler vectorizes them (they run on every float32 matmul operand at "high"/"medium").
namespace {

inline uint32_t round_bits(uint32_t b) {
  const bool special = (b & 0x7f800000u) == 0x7f800000u;
  const uint32_t nan_or_inf = (b & 0x007fffffu) ? ((b | 0x00400000u) & 0xffff0000u) : b;
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  return special ? nan_or_inf : rounded;
}

inline float round_fast(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  b = round_bits(b);
  float out;
  std::memcpy(&out, &b, sizeof out);
  return out;
}

}  // namespace

void round_bf16(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = round_fast(src[i]);
}

void bf16_split(const float* src, float* dst, int64_t n, int part, bool prefix) {
  if (part == 0) return round_bf16(src, dst, n);
  for (int64_t i = 0; i < n; ++i) {
    const float hi = round_fast(src[i]);
    const float r1 = src[i] - hi;
    const float mid = round_fast(r1);
    if (part == 1) {
      dst[i] = prefix ? hi + mid : mid;
    } else {
      const float lo = round_fast(r1 - mid);
      dst[i] = prefix ? hi + mid + lo : lo;
    }
  }
}

namespace {
inline uint16_t high_half(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return static_cast<uint16_t>(b >> 16);
}
}  // namespace

// (compiled for AVX-512 and AVX2 too, picked at load time for the host's CPU)
__attribute__((target_clones("arch=skylake-avx512", "avx2", "default")))
void bf16_part_bits(const float* __restrict src, int64_t n, uint16_t* __restrict hi,
                    uint16_t* __restrict hi2, uint16_t* __restrict mid) {
  // (one loop per case, with no branch inside, so that each vectorizes)
  if (mid == nullptr) {
    for (int64_t i = 0; i < n; ++i) hi[i] = high_half(round_fast(src[i]));
  } else if (hi2 == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float h = round_fast(src[i]);
      hi[i] = high_half(h);
      mid[i] = high_half(round_fast(src[i] - h));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float h = round_fast(src[i]);
      hi[i] = hi2[i] = high_half(h);
      mid[i] = high_half(round_fast(src[i] - h));
    }
  }
}

}  // namespace torchtpu::sim
