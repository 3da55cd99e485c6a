#pragma once
// TPU matrix-unit numerics (docs/design.md 4.2, docs/precision.md), on plain floats: no tensors,
// no dispatch.
//
// The MXU multiplies bf16 operands exactly and accumulates in fp32. A float32 matmul at "medium"
// (TorchTPU's DEFAULT) rounds each operand to the nearest bf16 and takes one pass. At "high" and
// "highest" each operand is split into bf16 parts as XLA's bf16_3x / bf16_6x algorithms split it
// (ALG_DOT_BF16_BF16_F32_X3 / _X6): hi = the upper 16 bits of a (truncation), mid = bf16(a - hi)
// and lo = bf16(a - hi - mid), rounded to nearest; a == hi + mid + lo exactly for every a whose
// parts do not underflow. Each pass is one product of parts summed over K in fp32; the passes are
// added in a fixed order, the smaller ones first (combine_passes).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace torchtpu::sim {

// PyTorch's float32 matmul precision, and the TPU precision it maps to.
enum class Precision {
  kDefault,  // "medium"  -> 1 bf16 pass: bf16(a)*bf16(b)
  kHigh,     // "high"    -> 3 passes (bf16_3x): (mid*hi + hi*mid) + hi*hi
  kHighest,  // "highest" -> 6 passes (bf16_6x):
             //              ((((mid*mid + hi*lo) + lo*hi) + hi*mid) + mid*hi) + hi*hi
};

int passes(Precision p);
const char* name(Precision p);  // "medium", "high", "highest"
Precision precision_from_name(const std::string& torch_name);

// The pairs (part of a, part of b) each pass multiplies, in the order their results are added
// (XLA's order: the smaller passes first, hi*hi last). Parts: 0 = hi, 1 = mid, 2 = lo; at
// kDefault part 0 is bf16(a), rounded to nearest.
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

// The upper 16 bits of a float (truncation toward zero to bf16), returned as a float: the hi part
// of the multi-pass split. NaN stays a (quiet) NaN, infinities stay infinite.
inline float truncate_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) bits |= 0x00400000u;
  bits &= 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// The three bf16 parts of a float32 operand at "high" / "highest": hi = truncate_bf16(x), mid =
// round_bf16(x - hi), lo = round_bf16(x - hi - mid). Both differences are exact, and x == hi +
// mid + lo for every finite x whose parts do not underflow (all three are bf16 values). An
// infinite x has NaN mid and lo (inf - inf), which combine_passes drops.
inline void split_bf16(float x, float& hi, float& mid, float& lo) {
  hi = truncate_bf16(x);
  const float r1 = x - hi;  // exact: the low 16 bits of x's significand
  mid = round_bf16(r1);
  lo = round_bf16(r1 - mid);  // exact: at most 8 significant bits remain
}

// The part `part` (0 hi, 1 mid, 2 lo) of x as the passes of `p` take it (at kDefault, bf16(x)).
inline float operand_part(float x, Precision p, int part) {
  if (p == Precision::kDefault) return part == 0 ? round_bf16(x) : 0.0f;
  float parts[3];
  split_bf16(x, parts[0], parts[1], parts[2]);
  return parts[part];
}

// The result of a matmul element from its passes' partial results `partial` (each the fp32 sum
// over K of one pass's exact products), in pass_pairs order: the passes before the last are added
// in order, their sum replaced by zero where it is NaN (XLA's ReplaceNaNWithZeros: an infinite
// operand has NaN mid and lo parts, and the hi*hi pass alone carries it), then hi*hi is added.
inline float combine_passes(const float* partial, int n) {
  if (n == 1) return partial[0];
  float small = partial[0];
  for (int i = 1; i + 1 < n; ++i) small += partial[i];
  if (std::isnan(small)) small = 0.0f;
  return small + partial[n - 1];
}

// Element-wise over buffers.
void round_bf16(const float* src, float* dst, int64_t n);
// The multi-pass part `part` (0 = hi, 1 = mid, 2 = lo; split_bf16) of every element, or with
// `prefix` the sum of parts 0..part, or with `suffix` the sum of parts part..2 (exact in float32:
// hi + mid has at most 16 significant bits, mid + lo is x - hi).
void bf16_split(const float* src, float* dst, int64_t n, int part, bool prefix, bool suffix = false);
// bf16(src[i]) as bf16 bit patterns (the upper half of the rounded float's bits).
void bf16_round_bits(const float* src, int64_t n, uint16_t* hi);
// The multi-pass parts of every element as bf16 bit patterns: hi[i], mid[i] and, where lo is
// given, lo[i] (split_bf16).
void bf16_split_bits(const float* src, int64_t n, uint16_t* hi, uint16_t* mid, uint16_t* lo);

}  // namespace torchtpu::sim
