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

void round_bf16(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = round_bf16(src[i]);
}

void bf16_part(const float* src, float* dst, int64_t n, int part) {
  for (int64_t i = 0; i < n; ++i) {
    float hi, mid, lo;
    split_bf16(src[i], hi, mid, lo);
    dst[i] = part == 0 ? hi : part == 1 ? mid : lo;
  }
}

void bf16_prefix(const float* src, float* dst, int64_t n, int upto) {
  for (int64_t i = 0; i < n; ++i) {
    float hi, mid, lo;
    split_bf16(src[i], hi, mid, lo);
    dst[i] = upto == 0 ? hi : upto == 1 ? hi + mid : hi + mid + lo;
  }
}

}  // namespace torchtpu::sim
