#pragma once
// What the MXU kernels share across their files (aten/Matmul.cpp, aten/Convolution.cpp,
// aten/Attention.cpp): the charge of an epilogue fused into a matmul's launch, and each family's
// estimate, which estimate_mxu_op (aten/DryRun.h) prices dry runs and recorded ops with.
#include "sim/CostModel.h"

#include <ATen/core/Tensor.h>

#include <array>

namespace torchtpu::aten {

// The cost of the epilogue (scale and add) of addmm-like ops, fused into the matmul launch.
void add_epilogue(sim::Estimate& e, const at::Tensor& out, const at::Tensor& self);

// The charge of a convolution (with its bias added in the same launch), and of its backward:
// each gradient asked for is one convolution-sized matmul.
sim::Estimate estimate_convolution(const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor& bias, const at::Tensor& output,
                                   bool transposed, int64_t groups);
sim::Estimate estimate_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& weight, bool transposed,
                                            int64_t groups, std::array<bool, 3> output_mask);

// The charge of fused attention's forward (or backward, with the bias's gradient when asked);
// `causal`: is_causal, the blocks above the diagonal skipped (aten/Attention.cpp).
sim::Estimate attention_estimate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, bool backward, bool bias_grad,
                                 bool causal);

}  // namespace torchtpu::aten
