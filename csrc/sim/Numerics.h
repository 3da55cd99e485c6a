#pragma once
// TPU matrix-unit numerics (docs/design.md 4.2), on plain floats: no tensors, no dispatch.
//
// The MXU multiplies bf16 operands exactly and accumulates in fp32. A float32 matmul is split
// into bf16 parts, a = hi + mid + lo with hi = bf16(a), mid = bf16(a - hi), lo = bf16(a - hi -
// mid), and the precision level chooses which products of parts are summed.
#include <cstdint>
#include <cstring>
#include <string>

namespace torchtpu::sim {

// PyTorch's float32 matmul precision, and the TPU precision it maps to.
enum class Precision {
  kDefault,  // "medium"  -> 1 bf16 pass: hi*hi
  kHigh,     // "high"    -> 3 passes (bf16_3x): hi*hi + hi*mid + mid*hi
  kHighest,  // "highest" -> 6 passes: hi*hi + hi*mid + mid*hi + mid*mid + hi*lo + lo*hi
};

int passes(Precision p);
const char* name(Precision p);  // "medium", "high", "highest"
Precision precision_from_name(const std::string& torch_name);

// The pairs (part of a, part of b) each pass multiplies, in the order the MXU runs them.
// Parts: 0 = hi, 1 = mid, 2 = lo.
struct PassPair {
  int a_part;
  int b_part;
};
const PassPair* pass_pairs(Precision p);  // passes(p) entries

// Round a float to the nearest bf16 (ties to even), returned as a float. NaN stays NaN,
// infinities stay infinite, values beyond bf16's range round to infinity.
inline float round_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    // Infinity keeps its bits; NaN stays a (quiet) NaN after truncation.
    bits = (bits & 0x007fffffu) ? ((bits | 0x00400000u) & 0xffff0000u) : bits;
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
    bits &= 0xffff0000u;
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// The three bf16 parts of a float: x == hi + mid + lo for every finite x whose parts do not
// underflow (all three are exact bf16 values).
inline void split_bf16(float x, float& hi, float& mid, float& lo) {
  hi = round_bf16(x);
  const float r1 = x - hi;  // exact
  mid = round_bf16(r1);
  lo = round_bf16(r1 - mid);
}

// Element-wise over buffers.
void round_bf16(const float* src, float* dst, int64_t n);
// Part `part` (0 = hi, 1 = mid, 2 = lo) of every element, or with `prefix` the sum of parts
// 0..part (part 1 with prefix gives hi + mid, exact in float32).
void bf16_split(const float* src, float* dst, int64_t n, int part, bool prefix);
// The bf16 parts of every element as bf16 bit patterns (the upper half of the part's float
// bits): hi[i] = bf16(src[i]) and, where given, hi2[i] = hi[i] and mid[i] = bf16(src[i] - hi).
void bf16_part_bits(const float* src, int64_t n, uint16_t* hi, uint16_t* hi2, uint16_t* mid);

}  // namespace torchtpu::sim
