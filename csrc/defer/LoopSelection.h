#pragma once
// Loop instruction selection (LoopSelection.cpp): which ops of a fused region run through the
// register-level loop (FusedLoop.h) rather than their ATen kernel, and with which operands.
// Picked per run: Scalar arguments (an add's alpha, a clamp's bound) are values of the run.
#include "defer/FusedRegion.h"

#include <optional>
#include <vector>

namespace torchtpu::defer {

// The value of a 0-dim host tensor (a CPU scalar, or a 0-dim operand over device memory, which
// only holds its value when the region runs), as the loop takes it.
float scalar_value(const at::Tensor& t);

// The loop instruction of an op run with `args`, when it has one: (op, a, b, out) over operand
// indices. `not_in_buffer`: per block slot, whether it holds a kernel's new result.
std::optional<loop::Instr> loop_instruction(const FusedOp& f, const torch::jit::Stack& args,
                                            c10::IntArrayRef shape,
                                            const std::vector<char>& not_in_buffer);

}  // namespace torchtpu::defer
