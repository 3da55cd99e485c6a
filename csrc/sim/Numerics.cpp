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
  // XLA's bf16_3x and bf16_6x (RewriteF32ToBF16X3 / X6): the products of the smaller parts
  // first, in this order, hi*hi last (docs/precision.md).
  static const PassPair one[1] = {{0, 0}};
  static const PassPair three[3] = {{1, 0}, {0, 1}, {0, 0}};
  static const PassPair six[6] = {{1, 1}, {0, 2}, {2, 0}, {0, 1}, {1, 0}, {0, 0}};
  switch (p) {
    case Precision::kDefault: return one;
    case Precision::kHigh: return three;
    case Precision::kHighest: return six;
  }
  return six;
}

// The buffer loops are written as straight-line bit operations on each element so that the
// compiler vectorizes them (they run on every float32 matmul operand on the MXU).
namespace {

inline uint32_t round_bits(uint32_t b) {
  const bool special = (b & 0x7f800000u) == 0x7f800000u;
  const uint32_t nan_or_inf = (b & 0x007fffffu) ? ((b | 0x00400000u) & 0xffff0000u) : b;
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  return special ? nan_or_inf : rounded;
}

inline uint32_t truncate_bits(uint32_t b) {
  const bool nan = (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0;
  return (nan ? (b | 0x00400000u) : b) & 0xffff0000u;
}

inline float truncate_fast(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  b = truncate_bits(b);
  float out;
  std::memcpy(&out, &b, sizeof out);
  return out;
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

void bf16_split(const float* src, float* dst, int64_t n, int part, bool prefix, bool suffix) {
  for (int64_t i = 0; i < n; ++i) {
    const float hi = truncate_fast(src[i]);
    const float r1 = src[i] - hi;
    const float mid = round_fast(r1);
    const float lo = round_fast(r1 - mid);
    const float parts[3] = {hi, mid, lo};
    if (prefix) {
      dst[i] = part == 0 ? hi : part == 1 ? hi + mid : src[i];
    } else if (suffix) {
      dst[i] = part == 0 ? src[i] : part == 1 ? r1 : lo;
    } else {
      dst[i] = parts[part];
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
void bf16_round_bits(const float* __restrict src, int64_t n, uint16_t* __restrict hi) {
  for (int64_t i = 0; i < n; ++i) hi[i] = high_half(round_fast(src[i]));
}

__attribute__((target_clones("arch=skylake-avx512", "avx2", "default")))
void bf16_split_bits(const float* __restrict src, int64_t n, uint16_t* __restrict hi,
                     uint16_t* __restrict mid, uint16_t* __restrict lo) {
  // (one loop per case, with no branch inside, so that each vectorizes)
  if (lo == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float h = truncate_fast(src[i]);
      hi[i] = high_half(h);
      mid[i] = high_half(round_fast(src[i] - h));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float h = truncate_fast(src[i]);
      const float r1 = src[i] - h;
      const float m = round_fast(r1);
      hi[i] = high_half(h);
      mid[i] = high_half(m);
      lo[i] = high_half(round_fast(r1 - m));
    }
  }
}

}  // namespace torchtpu::sim
