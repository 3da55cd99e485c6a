#pragma once
// The register-level loop of fused regions: a run of simple float32 element-wise ops executed
// tile by tile (256 elements, in L1) in one pass, instead of one ATen kernel call per op and
// block. Only ops whose results are exact in IEEE arithmetic are taken (add/sub with alpha
// +-1, mul, division of two tensors, neg, abs, clamp_min/relu, maximum, minimum), and the ops of
// AdamW's update computed in the order and with the fused multiply-adds of PyTorch's vector
// kernels (lerp with a Scalar weight, addcmul, addcdiv), so results are bit for bit those
// of PyTorch's kernels (test_defer.py checks each against the CPU). This file knows nothing of
// ATen; FusedLoop.cpp is compiled for AVX2 + FMA and used only on CPUs that have them
// (available()).
#include <cstdint>

namespace torchtpu::defer::loop {

enum class Op : uint8_t {
  add, sub, mul, div, neg, abs, clamp_min, maximum, minimum,
  lerp,     // a + s * (b - a) as ATen computes it (|s| < 0.5: fma(s, b - a, a), else
            // fma(s - 1, b - a, b))
  addcmul,  // fma(s * b, c, a)
  addcdiv,  // a + (s * b) / c
};

// out = op(a, b[, c]); each operand is an entry of the pointer table, or a scalar (b only, or a
// for add/mul/maximum/minimum) given by the scalar table when scalar[i] is set. `s`: the op's
// Scalar argument (lerp's weight, addcmul's and addcdiv's value) as a float, as ATen converts it.
struct Instr {
  Op op;
  int out, a, b;  // entries (b = -1 for unary ops)
  int c = -1;     // the third tensor of addcmul and addcdiv
  float s = 0.f;
};

// Runs `count` instructions over `n` elements. ptrs[i]: contiguous float data of entry i
// (ignored when is_scalar[i]); scalars[i]: its value when is_scalar[i].
void run(const Instr* instrs, int count, float* const* ptrs, const float* scalars,
         const bool* is_scalar, int64_t n);

// True when this CPU has AVX2 and FMA (checked once).
bool available();

}  // namespace torchtpu::defer::loop
