// The matmul family and convolutions on the simulated MXU: mm, bmm, addmm, baddbmm, addmv (mv),
// dot, vdot, _int_mm, and convolution forward and backward (1-, 2- and 3-d, grouped, strided,
// dilated, transposed). PyTorch's matmul, linear and mv decompose into these. Each kernel checks its inputs
// with CPU's rules and messages, sizes its output, runs the product through sim::matmul (TPU
// numerics) and charges the launch to the cost model. dtypes the MXU does not take (float64,
// complex, integers other than int8) run the host kernel on the device memory instead, counted
// as a fallback.

// The CPU kernels PyTorch's x86-64 wheels build (AVX2 and AVX512 variants besides the default):
// DispatchStub's call then names the entry point libtorch_cpu exports, which lets the fused
// attention call PyTorch's CPU flash-attention stubs with its own results (writes_in_place).
// Elsewhere those calls are left out and the stubs' CPU wrappers run.
#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION) && !defined(HAVE_AVX512_CPU_DEFINITION)
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#define TORCHTPU_FLASH_STUBS 1
#endif
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "sim/Mxu.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/ops/constant_pad_nd.h>
#include <c10/util/strides.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_scaled_mm.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmv.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/vdot.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {


void check_dtypes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(), " != ",
              b.scalar_type());
}

// Resizes a matmul's out= tensor to the product's sizes, after the check the CPU's structured
// out= wrappers make first: the out= tensor has the product's dtype (`dtype`, its operands').
void resize_out(const at::Tensor& out, c10::IntArrayRef sizes, c10::ScalarType dtype) {
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(dtype), ", but got ", out.dtype(), " instead");
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, sizes);
}
void resize_out(const at::Tensor& out, c10::IntArrayRef sizes) {
  resize_out(out, sizes, out.scalar_type());
}

// The cost of the epilogue (scale and add) of addmm-like ops, fused into the matmul launch.
void add_epilogue(sim::Estimate& e, const at::Tensor& out, const at::Tensor& self) {
  const auto& model = sim::cost_model();
  e = model.combine(
      e, model.vector(out.numel(), 2.0, sim::CostModel::padded_bytes(self.sizes(), self.element_size())));
}

// The charge of out = beta * self + alpha * (a @ b) (self undefined: a plain product): one
// launch, the matmul and its epilogue.
sim::Estimate estimate_product(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                               const at::Tensor& out) {
  auto e = sim::matmul_estimate(a, b, out);
  if (self.defined()) add_epilogue(e, out, self);
  return e;
}

// p[i, j] += bias[j] for a contiguous float32 matrix p and a bias of one row (1-D, or rows
// broadcast with stride 0), the bias of a linear layer: the sum add_ makes, without building a
// TensorIterator for it. False, having done nothing, for anything else.
bool add_rows(const at::Tensor& p, const at::Tensor& bias) {
  if (p.scalar_type() != at::kFloat || bias.scalar_type() != at::kFloat || p.dim() != 2 ||
      !p.is_contiguous() || bias.dim() < 1 || bias.dim() > 2 || bias.size(-1) != p.size(1) ||
      bias.stride(-1) != 1 || (bias.dim() == 2 && bias.size(0) != 1 && bias.stride(0) != 0) ||
      bias.is_conj() || bias.is_neg()) {
    return false;
  }
  float* out = p.data_ptr<float>();
  const float* row = bias.const_data_ptr<float>();
  const int64_t n = p.size(1);
  at::parallel_for(0, p.size(0), std::max<int64_t>(1, kParallelElements / std::max<int64_t>(n, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) {
                       float* o = out + i * n;
                       for (int64_t j = 0; j < n; ++j) o[j] += row[j];
                     }
                   });
  return true;
}

// out = beta * self + alpha * (a @ b) on host aliases (h_*); `h_self` undefined means a plain
// product; `out_aliases_self` says whether out shares memory with self. `self` is broadcast.
// On the MXU with `precision`, or (on_mxu false) on the host.
void run_product(const at::Tensor& h_self, const at::Tensor& h_a, const at::Tensor& h_b,
                 const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& h_out,
                 bool out_aliases_self, bool on_mxu, sim::Precision precision) {
  const bool integral = at::isIntegralType(h_out.scalar_type(), /*includeBool=*/true);
  // As PyTorch's CPU kernels do: the scalars take the result's type.
  const c10::Scalar b = integral ? c10::Scalar(beta.toLong()) : beta;
  const c10::Scalar a = integral ? c10::Scalar(alpha.toLong()) : alpha;
  // (A complex beta is zero when both parts are: toDouble() would refuse its imaginary part.)
  const bool use_beta = h_self.defined() && !(integral ? b.toLong() == 0
                                              : b.isComplex() ? b.toComplexDouble() == 0.0
                                                              : b.toDouble() == 0.0);
  const bool epilogue = use_beta || !a.equal(1);
  // bf16 with an epilogue: the MXU adds the bias to the fp32 accumulator and rounds once.
  // bf16 products are exact in fp32, so an fp32 GEMM of the widened operands is that.
  const bool widen = on_mxu && epilogue && h_out.scalar_type() == at::kBFloat16;
  const bool direct = !widen && (!use_beta || !out_aliases_self);
  at::Tensor p = direct ? h_out
                        : at::empty(h_out.sizes(), h_out.options().dtype(
                                                       widen ? at::kFloat : h_out.scalar_type()));
  // (beta == 1, the bias of a linear layer: self added as it is, as self * 1 is self.)
  const bool one = use_beta && !b.isComplex() && (integral ? b.toLong() == 1 : b.toDouble() == 1.0);
  if (on_mxu && one && a.equal(1) && precision == sim::Precision::kHighest &&
      h_out.scalar_type() == at::kFloat && h_a.scalar_type() == at::kFloat && h_a.dim() == 2 &&
      h_b.dim() == 2 && h_self.dim() <= 2) {
    // float32 at "highest" is one float32 GEMM (sim/Mxu.h): PyTorch's CPU addmm is that GEMM with
    // the bias in its accumulator (laid into the result first, then a GEMM with beta 1), as a
    // linear layer on the CPU runs, rather than a second pass over the result to add the bias.
    at::addmm_out(p, h_self, h_a, h_b);
    if (!direct) h_out.copy_(p);
    return;
  }
  // A float32 result of 16-bit operands (the out_dtype matmuls): the MXU's float32 accumulator,
  // not rounded back (bf16 and fp16 products are exact in float32).
  const bool accumulator_out = on_mxu && h_out.scalar_type() == at::kFloat &&
                               h_a.scalar_type() != at::kFloat;
  if ((widen || accumulator_out) && h_a.scalar_type() == at::kBFloat16 &&
      h_b.scalar_type() == at::kBFloat16) {
    sim::matmul_bf16_to_float(h_a, h_b, p);
  } else if (widen || accumulator_out) {
    sim::matmul(h_a.to(at::kFloat), h_b.to(at::kFloat), p, sim::Precision::kHighest);
  } else if (on_mxu) {
    sim::matmul(h_a, h_b, p, precision);
  } else {
    at::matmul_out(p, h_a, h_b);
  }
  if (!a.equal(1)) p.mul_(a);
  if (use_beta) {
    const at::Tensor term = widen ? h_self.to(at::kFloat) : h_self;
    if (!(one && add_rows(p, term))) p.add_(one ? term : term.mul(b));
  }
  if (!direct) h_out.copy_(p);
}

// Charges and launches out = beta * self + alpha * (a @ b); see run_product. Host aliases are
// made on the calling thread, so the work sees the shapes of issue time.
void product(const std::string& op, const at::Tensor& self, const at::Tensor& a,
             const at::Tensor& b, const c10::Scalar& beta, const c10::Scalar& alpha,
             const at::Tensor& out) {
  const at::Tensor h_self = self.defined() ? host_alias(self) : at::Tensor();
  const at::Tensor h_a = host_alias(a), h_b = host_alias(b), h_out = host_alias(out);
  const bool aliased = self.defined() && out.is_alias_of(self);
  if (!sim::mxu_supports(a.scalar_type())) {
    note_fallback(op + " (" + std::string(c10::toString(a.scalar_type())) + ")",
                  "uses a dtype the MXU does not take (it multiplies bf16, float32 in bf16 "
                  "passes, float16 and int8); it runs on the host, in place on the device memory.");
    wait_for_device(out.device());
    const runtime::metrics::HostTime timed(op);
    run_product(h_self, h_a, h_b, beta, alpha, h_out, aliased, false, sim::Precision::kHighest);
    sim::record(op, estimate_product(self, a, b, out));  // priced as if native (flagged)
    return;
  }
  sim::record(op, estimate_product(self, a, b, out));
  const auto precision = sim::current_precision();  // the caller's, captured now
  const int64_t macs = out.numel() * (a.dim() == 0 ? 1 : a.size(-1));
  const bool parallel = macs >= kParallelMacs;
  if (launch_here_if_idle(out.device(), op,
                          [&] {
                            run_product(h_self, h_a, h_b, beta, alpha, h_out, aliased, true,
                                        precision);
                          },
                          parallel)) {
    return;
  }
  launch(out.device(), op,
         [=, keep = std::vector<at::Tensor>{self, a, b, out}] {
           run_product(h_self, h_a, h_b, beta, alpha, h_out, aliased, true, precision);
         },
         {out}, parallel);
}

void plain_product(const std::string& op, const at::Tensor& a, const at::Tensor& b,
                   const at::Tensor& out) {
  product(op, at::Tensor(), a, b, 0, 1, out);
}

// ---------------------------------------------------------------------------------------------

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_same_device("aten::mm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  check_dtypes(self, mat2);
  resize_out(out, {self.size(0), mat2.size(1)}, self.scalar_type());
  plain_product("aten::mm", self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_same_device("aten::bmm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0), "batch1 and batch2 must have same number of batches, got ",
              self.size(0), " and ", mat2.size(0));
  TORCH_CHECK(self.size(2) == mat2.size(1), "Expected size for first two dimensions of batch2 tensor to be: [",
              self.size(0), ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  check_dtypes(self, mat2);
  resize_out(out, {self.size(0), self.size(1), mat2.size(2)}, self.scalar_type());
  plain_product("aten::bmm", self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("aten::addmm", {&self, &mat1, &mat2, &out});
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              mat1.size(0), "x", mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  check_dtypes(mat1, mat2);
  TORCH_CHECK(self.scalar_type() == mat1.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  const std::vector<int64_t> sizes{mat1.size(0), mat2.size(1)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), sizes), "The expanded size of self ",
              self.sizes(), " must match the result size ", c10::IntArrayRef(sizes));
  resize_out(out, sizes, mat1.scalar_type());
  product("aten::addmm", self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1,
                        const at::Tensor& batch2, const c10::Scalar& beta,
                        const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("aten::baddbmm", {&self, &batch1, &batch2, &out});
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", batch1.size(0),
              ", ", batch1.size(2), "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
  check_dtypes(batch1, batch2);
  const std::vector<int64_t> sizes{batch1.size(0), batch1.size(1), batch2.size(2)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), sizes), "The expanded size of self ",
              self.sizes(), " must match the result size ", c10::IntArrayRef(sizes));
  resize_out(out, sizes, batch1.scalar_type());
  product("aten::baddbmm", self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("aten::addmv", {&self, &mat, &vec, &out});
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0),
              "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  check_dtypes(mat, vec);
  resize_out(out, {mat.size(0)}, mat.scalar_type());
  product("aten::addmv", self, mat, vec, beta, alpha, out);
  return out;
}

at::Tensor dot_kernel(const at::Tensor& self, const at::Tensor& tensor) {
  check_same_device("aten::dot", {&self, &tensor});
  TORCH_CHECK(self.dim() == 1 && tensor.dim() == 1,
              "1D tensors expected, but got ", self.dim(), "D and ", tensor.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == tensor.scalar_type(),
              "dot : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", tensor.scalar_type());
  TORCH_CHECK(self.numel() == tensor.numel(),
              "inconsistent tensor size, expected tensor [", self.numel(), "] and src [",
              tensor.numel(), "] to have the same number of elements, but got ", self.numel(),
              " and ", tensor.numel(), " elements respectively");
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({}, self.options());
  plain_product("aten::dot", self, tensor, out);
  return out;
}

at::Tensor vdot_kernel(const at::Tensor& self, const at::Tensor& other) {
  if (!self.is_complex()) return dot_kernel(self, other);
  check_same_device("aten::vdot", {&self, &other});
  wait_for_device(self.device());
  note_fallback("aten::vdot (" + std::string(c10::toString(self.scalar_type())) + ")");
  at::Tensor out = on_device(at::vdot(host_alias(self), host_alias(other)), self.device());
  sim::record("aten::vdot", sim::matmul_estimate(1, 1, self.numel(), 1, self.scalar_type(),
                                                 2 * sim::CostModel::padded_bytes(
                                                         self.sizes(), self.element_size())));
  return out;
}

at::Tensor& int_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_same_device("aten::_int_mm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "Expected self and mat2 to be 2D tensors");
  TORCH_CHECK(self.scalar_type() == at::kChar && mat2.scalar_type() == at::kChar,
              "_int_mm expects int8 operands, got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(out.scalar_type() == at::kInt, "_int_mm expects an int32 result, got ",
              out.scalar_type());
  resize_out(out, {self.size(0), mat2.size(1)}, at::kInt);
  plain_product("aten::_int_mm", self, mat2, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The out_dtype matmuls (torch.mm / bmm / addmm / baddbmm(..., out_dtype=)): float32 results of
// bfloat16 or float16 operands, the MXU's accumulator kept (Google TorchTPU's precision notebook
// calls torch.bmm(a, b, out_dtype=torch.float32)). As on CUDA, the out dtype is the operands' or
// float32 for 16-bit operands, and a bias has the operands' dtype or the out dtype. (PyTorch's
// CPU has no kernel for them.)

void check_out_dtype(const char* op, const at::Tensor& a, const at::Tensor& b,
                     c10::ScalarType out_dtype, const at::Tensor* self) {
  check_dtypes(a, b);
  const c10::ScalarType in = a.scalar_type();
  TORCH_CHECK(out_dtype == in || (out_dtype == at::kFloat &&
                                  (in == at::kBFloat16 || in == at::kHalf)),
              op, ": out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs");
  if (self != nullptr) {
    TORCH_CHECK(self->scalar_type() == out_dtype || self->scalar_type() == in, op,
                ": self dtype must match either out_dtype or mat1 dtype");
  }
}

at::Tensor& mm_dtype_out(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype,
                         at::Tensor& out) {
  check_out_dtype("aten::mm", self, mat2, out_dtype, nullptr);
  if (out_dtype == self.scalar_type()) return mm_out(self, mat2, out);
  check_same_device("aten::mm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "self and mat2 must be matrices");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  resize_out(out, {self.size(0), mat2.size(1)}, out_dtype);
  plain_product("aten::mm", self, mat2, out);
  return out;
}

at::Tensor& bmm_dtype_out(const at::Tensor& self, const at::Tensor& mat2,
                          c10::ScalarType out_dtype, at::Tensor& out) {
  check_out_dtype("aten::bmm", self, mat2, out_dtype, nullptr);
  if (out_dtype == self.scalar_type()) return bmm_out(self, mat2, out);
  check_same_device("aten::bmm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 3 && mat2.dim() == 3, "batch1 and batch2 must be 3D tensors");
  TORCH_CHECK(self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", self.size(0),
              ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  resize_out(out, {self.size(0), self.size(1), mat2.size(2)}, out_dtype);
  plain_product("aten::bmm", self, mat2, out);
  return out;
}

at::Tensor& addmm_dtype_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                            c10::ScalarType out_dtype, const c10::Scalar& beta,
                            const c10::Scalar& alpha, at::Tensor& out) {
  check_out_dtype("aten::addmm", mat1, mat2, out_dtype, &self);
  if (out_dtype == mat1.scalar_type() && self.scalar_type() == out_dtype) {
    return addmm_out(self, mat1, mat2, beta, alpha, out);
  }
  check_same_device("aten::addmm", {&self, &mat1, &mat2, &out});
  TORCH_CHECK(mat1.dim() == 2 && mat2.dim() == 2, "mat1 and mat2 must be matrices");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              mat1.size(0), "x", mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  const std::vector<int64_t> sizes{mat1.size(0), mat2.size(1)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), sizes), "The expanded size of self ",
              self.sizes(), " must match the result size ", c10::IntArrayRef(sizes));
  resize_out(out, sizes, out_dtype);
  product("aten::addmm", self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_dtype_out(const at::Tensor& self, const at::Tensor& batch1,
                              const at::Tensor& batch2, c10::ScalarType out_dtype,
                              const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_out_dtype("aten::baddbmm", batch1, batch2, out_dtype, &self);
  if (out_dtype == batch1.scalar_type() && self.scalar_type() == out_dtype) {
    return baddbmm_out(self, batch1, batch2, beta, alpha, out);
  }
  check_same_device("aten::baddbmm", {&self, &batch1, &batch2, &out});
  TORCH_CHECK(batch1.dim() == 3 && batch2.dim() == 3, "batch1 and batch2 must be 3D tensors");
  TORCH_CHECK(batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", batch1.size(0),
              ", ", batch1.size(2), "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
  const std::vector<int64_t> sizes{batch1.size(0), batch1.size(1), batch2.size(2)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), sizes), "The expanded size of self ",
              self.sizes(), " must match the result size ", c10::IntArrayRef(sizes));
  resize_out(out, sizes, out_dtype);
  product("aten::baddbmm", self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor mm_dtype(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype));
  return mm_dtype_out(self, mat2, out_dtype, out);
}

at::Tensor bmm_dtype(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype));
  return bmm_dtype_out(self, mat2, out_dtype, out);
}

at::Tensor addmm_dtype(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                       c10::ScalarType out_dtype, const c10::Scalar& beta,
                       const c10::Scalar& alpha) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, mat1.options().dtype(out_dtype));
  return addmm_dtype_out(self, mat1, mat2, out_dtype, beta, alpha, out);
}

at::Tensor baddbmm_dtype(const at::Tensor& self, const at::Tensor& batch1,
                         const at::Tensor& batch2, c10::ScalarType out_dtype,
                         const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, batch1.options().dtype(out_dtype));
  return baddbmm_dtype_out(self, batch1, batch2, out_dtype, beta, alpha, out);
}

at::Tensor int_mm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(at::kInt));
  int_mm_out(self, mat2, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// fp8 scaled matmul (torch._scaled_mm): out = (scale_a * self) @ (scale_b * mat2) (+ bias), in
// the output dtype. One launch at the chip's fp8 rate (v7 multiplies fp8 natively; the other
// generations' MXUs take the operands widened to bf16, at the bf16 rate: sim/CostModel). PyTorch's
// CPU kernel computes it on the host (fp8 values widened, fp32 accumulation, as the MXU
// accumulates), inline after the queued work, so its argument checks raise at the call.

sim::Estimate scaled_mm_estimate(const at::Tensor& self, const at::Tensor& mat2,
                                 const at::Tensor& out) {
  const double hbm = sim::CostModel::padded_bytes(self.sizes(), 1) +
                     sim::CostModel::padded_bytes(mat2.sizes(), 1) +
                     sim::CostModel::padded_bytes(out.sizes(), static_cast<int>(out.element_size()));
  return sim::cost_model().matmul(1, self.size(0), self.size(1), mat2.size(1), 1, 1, hbm,
                                  sim::MxuRate::fp8);
}

at::Tensor& scaled_mm_out(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                          const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                          const std::optional<at::Tensor>& scale_result,
                          std::optional<c10::ScalarType> out_dtype, bool use_fast_accum,
                          at::Tensor& out) {
  const at::Tensor* b = bias.has_value() && bias->defined() ? &*bias : nullptr;
  const at::Tensor* r = scale_result.has_value() && scale_result->defined() ? &*scale_result
                                                                            : nullptr;
  check_same_device("aten::_scaled_mm", {&self, &mat2, &scale_a, &scale_b, b, r, &out});
  wait_for_device(out.device());
  std::optional<at::Tensor> h_bias, h_result_scale;
  if (b != nullptr) h_bias = host_alias(*b);
  if (r != nullptr) h_result_scale = host_alias(*r);
  const at::Tensor result = at::_scaled_mm(host_alias(self), host_alias(mat2), host_alias(scale_a),
                                           host_alias(scale_b), h_bias, h_result_scale, out_dtype,
                                           use_fast_accum);
  resize_out(out, result.sizes());
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Expected out tensor to have dtype ",
              result.dtype(), ", but got ", out.dtype(), " instead");
  host_alias(out).copy_(result);
  sim::record("aten::_scaled_mm", scaled_mm_estimate(self, mat2, out));
  return out;
}

at::Tensor scaled_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                     const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& scale_result,
                     std::optional<c10::ScalarType> out_dtype, bool use_fast_accum) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype.value_or(self.scalar_type())));
  return scaled_mm_out(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
                       use_fast_accum, out);
}

// ---------------------------------------------------------------------------------------------
// Convolution. PyTorch routes a new backend's convolutions to the *_overrideable entry points.
// A convolution is bilinear in (input, weight), so it follows the MXU numerics exactly as a
// matmul does (sim::bilinear_passes): PyTorch's host convolution runs on bf16 parts of the
// operands, with exact products and fp32 accumulation. The cost is charged as the im2col
// matmul the TPU runs: M = batch x output positions, K = input channels per group x kernel
// positions, N = output channels per group, one matmul per group.

int64_t prod(c10::IntArrayRef xs) {
  int64_t p = 1;
  for (auto x : xs) p *= x;
  return p;
}

sim::Estimate conv_estimate(const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& output, bool transposed, int64_t groups) {
  // For a transposed convolution the roles of input and output positions swap.
  const at::Tensor& positions = transposed ? input : output;
  const int64_t M = positions.size(0) * prod(positions.sizes().slice(2));
  const int64_t kernel = prod(weight.sizes().slice(2));
  const int64_t K = transposed ? weight.size(0) / groups : weight.size(1) * kernel;
  const int64_t N = transposed ? weight.size(1) * kernel : weight.size(0) / groups;
  const int bytes = static_cast<int>(input.element_size());
  const double hbm = sim::CostModel::padded_bytes(input.sizes(), bytes) +
                     sim::CostModel::padded_bytes(weight.sizes(), bytes) +
                     sim::CostModel::padded_bytes(output.sizes(), bytes);
  return sim::matmul_estimate(groups, M, K, N, input.scalar_type(), hbm);
}

// The charge of a convolution (with its bias added in the same launch).
sim::Estimate estimate_convolution(const at::Tensor& input, const at::Tensor& weight,
                                   const at::Tensor& bias, const at::Tensor& output,
                                   bool transposed, int64_t groups) {
  auto e = conv_estimate(input, weight, output, transposed, groups);
  if (bias.defined()) add_epilogue(e, output, bias);
  return e;
}

// The charge of a convolution's backward: each gradient asked for is one convolution-sized
// matmul.
sim::Estimate estimate_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& weight, bool transposed,
                                            int64_t groups, std::array<bool, 3> output_mask) {
  sim::Estimate e;
  const auto one = conv_estimate(input, weight, grad_output, transposed, groups);
  for (int i = 0; i < 2; ++i) {
    if (output_mask[i]) e += one;
  }
  return e;
}

// A TPU tensor over the memory of host result `out` (taken over when `out` owns it alone).
at::Tensor in_host_memory(at::Tensor out, c10::Device device) {
  if (!out.is_contiguous() || out.storage_offset() != 0 || out.storage().use_count() != 1) {
    out = out.clone(at::MemoryFormat::Contiguous);  // one copy, owned alone
  }
  c10::StorageImpl* from = out.storage().unsafeGetStorageImpl();
  const size_t nbytes = from->nbytes();
  c10::DataPtr data = from->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
  data.unsafe_set_device(device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr,
                       /*resizable=*/false);
  auto result = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), out.dtype());
  result.unsafeGetTensorImpl()->set_sizes_contiguous(out.sizes());
  return result;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::IntArrayRef stride, c10::IntArrayRef padding,
                                    c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  wait_for_device(input.device());
  static const std::string kName = "aten::convolution_overrideable";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  const at::Tensor* b = bias.has_value() ? &*bias : nullptr;
  check_same_device("aten::convolution", {&input, &weight, b});
  std::optional<at::Tensor> h_bias;
  if (b != nullptr && b->defined()) h_bias = host_alias(*b);
  auto conv = [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bb) {
    return at::convolution(x, w, bb, stride, padding, dilation, transposed, output_padding, groups);
  };
  const at::Tensor x = host_alias(input), w = host_alias(weight);
  const auto dtype = input.scalar_type();
  at::Tensor out;
  if (dtype == at::kFloat || dtype == at::kHalf) {
    const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat);
    sim::bilinear_passes(xf, wf, sim::current_precision(),
                         [&](const at::Tensor& xp, const at::Tensor& wp, bool accumulate) {
                           if (accumulate) {
                             out.add_(conv(xp, wp, std::nullopt));
                           } else {
                             out = conv(xp, wp, std::nullopt);
                           }
                         });
    if (h_bias) {  // the bias is added on the VPU, in fp32, broadcast over channels
      std::vector<int64_t> shape(out.dim(), 1);
      shape[1] = out.size(1);
      out.add_(h_bias->to(at::kFloat).view(shape));
    }
    if (dtype == at::kHalf) out = out.to(at::kHalf);
  } else {
    if (dtype != at::kBFloat16) {
      note_fallback("aten::convolution (" + std::string(c10::toString(dtype)) + ")",
                    "uses a dtype the MXU does not take; it runs on the host, in place on the "
                    "device memory.");
    }
    out = conv(x, w, h_bias);  // bf16: PyTorch's bf16 convolution accumulates in fp32
  }
  at::Tensor result = ResultInHostMemory::active() ? in_host_memory(out, input.device())
                                                  : on_device(out, input.device());
  sim::record("aten::convolution",
              estimate_convolution(input, weight, b ? *b : at::Tensor(), result, transposed, groups));
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  wait_for_device(input.device());
  static const std::string kName = "aten::convolution_backward_overrideable";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  check_same_device("aten::convolution_backward", {&grad_output, &input, &weight});
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto backward = [&](const at::Tensor& go, const at::Tensor& x, const at::Tensor& w,
                      std::array<bool, 3> mask) {
    return at::convolution_backward(go, x, w, bias_sizes, stride, padding, dilation, transposed,
                                    output_padding, groups, mask);
  };
  const at::Tensor go = host_alias(grad_output), x = host_alias(input), w = host_alias(weight);
  const auto dtype = input.scalar_type();
  at::Tensor gi, gw, gb;
  if (dtype == at::kFloat || dtype == at::kHalf) {
    // grad_input is bilinear in (grad_output, weight), grad_weight in (input, grad_output).
    // Two calls cover the passes of both at "high": (go_hm, x_hi, w_hi) gives
    // go_hm*w_hi and x_hi*go_hm; (go_hi, x_mid, w_mid) gives go_hi*w_mid and x_mid*go_hi.
    const at::Tensor gof = go.to(at::kFloat), xf = x.to(at::kFloat), wf = w.to(at::kFloat);
    const auto p = sim::current_precision();
    std::array<bool, 3> products{output_mask[0], output_mask[1], false};
    if (p == sim::Precision::kHighest) {
      std::tie(gi, gw, std::ignore) = backward(gof, xf, wf, products);
    } else if (p == sim::Precision::kDefault) {
      std::tie(gi, gw, std::ignore) =
          backward(sim::bf16_hi(gof), sim::bf16_hi(xf), sim::bf16_hi(wf), products);
    } else {
      const at::Tensor go_hi = sim::bf16_hi(gof);
      auto [gi1, gw1, unused1] = backward(sim::bf16_hi_mid(gof), sim::bf16_hi(xf), sim::bf16_hi(wf), products);
      auto [gi2, gw2, unused2] = backward(go_hi, sim::bf16_mid(xf), sim::bf16_mid(wf), products);
      if (output_mask[0]) gi = gi1.add_(gi2);
      if (output_mask[1]) gw = gw1.add_(gw2);
    }
    if (output_mask[2]) {  // a reduction on the VPU, in fp32
      std::vector<int64_t> dims{0};
      for (int64_t d = 2; d < gof.dim(); ++d) dims.push_back(d);
      // Summed over a dense copy of a strided grad_output: the sum's order, hence its rounding,
      // is then the one of a dense grad_output (as on the CPU, whose kernels read grad_output
      // dense), not one of the strides.
      gb = gof.contiguous(gof.suggest_memory_format()).sum(dims);
    }
    if (dtype == at::kHalf) {
      for (auto* t : {&gi, &gw, &gb}) {
        if (t->defined()) *t = t->to(at::kHalf);
      }
    }
  } else {
    if (dtype != at::kBFloat16) {
      note_fallback("aten::convolution_backward (" + std::string(c10::toString(dtype)) + ")",
                    "uses a dtype the MXU does not take; it runs on the host, in place on the "
                    "device memory.");
    }
    std::tie(gi, gw, gb) = backward(go, x, w, output_mask);
  }
  const auto device = input.device();
  std::tuple<at::Tensor, at::Tensor, at::Tensor> result{on_device(gi, device), on_device(gw, device),
                                                        on_device(gb, device)};
  const sim::Estimate e =
      estimate_convolution_backward(grad_output, input, weight, transposed, groups, output_mask);
  if (e.launches > 0) sim::record("aten::convolution_backward", e);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Fused attention (docs/simulated-chip.md, "Fused attention"). scaled_dot_product_attention on
// tpu picks PyTorch's "overrideable" backend (_fused_sdp_choice) when it can: 4-D inputs (key
// and value heads dividing the query heads: grouped-query attention), no dropout, float32 /
// bfloat16 / float16. The forward is one launch that never writes the L x S score matrix to HBM:
// flash-style, each block of query rows runs QK^T, an online softmax and PV in VMEM, so HBM moves
// Q, K, V, the mask, the output and the row log-sum-exp; the backward recomputes the scores from
// those (five products). The host computes it with PyTorch's CPU flash-attention kernels; Q, K
// and V (and the output gradient) enter them as the MXU's passes take them at the current
// precision (default: rounded to bf16), the probabilities in float32. A float mask (an attention
// bias) that requires its gradient takes the same kernels: the backward also writes the bias's
// gradient, the scores' gradient summed over the dimensions the bias broadcasts over
// (attention_bias_grad), as CUDA's memory-efficient attention kernel gives it.

// K and V of one (batch, head) are read from HBM once when they fit half of VMEM; otherwise
// once per block of 512 query rows.
double attention_kv_reads(int64_t L, int64_t S, int64_t E, int64_t Ev, int64_t bytes) {
  const double per_head = double(S) * double(E + Ev) * double(bytes);
  if (per_head <= double(runtime::current_chip().vmem_bytes) / 2) return 1;
  return double((L + 511) / 512);
}

// `bias_grad`: the backward also writes the gradient of the mask (an attention bias).
sim::Estimate attention_estimate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, bool backward, bool bias_grad = false) {
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const int64_t batch = L * E > 0 ? q.numel() / (L * E) : 0;
  const int bytes = static_cast<int>(q.element_size());
  auto padded = [](const at::Tensor& t) {
    return t.defined() ? sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size()))
                       : 0.0;
  };
  const double kv = attention_kv_reads(L, S, E, Ev, bytes) * (padded(k) + padded(v));
  const double out = sim::CostModel::padded_bytes({batch, L, Ev}, bytes);
  const double lse = sim::CostModel::padded_bytes({batch, L}, 4);
  const auto dtype = q.scalar_type();
  const auto& model = sim::cost_model();
  sim::Estimate e;
  if (!backward) {
    // QK^T, then PV; the softmax (scale, mask, max, exp, sum, rescale) on the VPU.
    const double hbm = padded(q) + kv + padded(mask) + out + lse;
    e = model.combine(sim::matmul_estimate(batch, L, E, S, dtype, hbm),
                      sim::matmul_estimate(batch, L, S, Ev, dtype, 0));
    e = model.combine(e, model.vector(batch * L * S, 6.0, 0));
  } else {
    // Read Q, K, V, O, dO, the mask and the log-sum-exp; write dQ, dK, dV. Products: S = QK^T
    // again, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
    // With the bias's gradient, dS (formed on the VPU for dQ and dK) is also written out.
    const double hbm = 2 * (padded(q) + padded(k) + padded(v)) + 2 * out + padded(mask) + lse +
                       (kv - padded(k) - padded(v)) + (bias_grad ? padded(mask) : 0.0);
    e = model.combine(sim::matmul_estimate(batch, L, E, S, dtype, hbm),
                      sim::matmul_estimate(batch, S, L, Ev, dtype, 0));
    e = model.combine(e, sim::matmul_estimate(batch, L, Ev, S, dtype, 0));
    e = model.combine(e, sim::matmul_estimate(batch, L, S, E, dtype, 0));
    e = model.combine(e, sim::matmul_estimate(batch, S, L, E, dtype, 0));
    e = model.combine(e, model.vector(batch * L * S, 8.0, 0));
  }
  return e;
}

// The mask as PyTorch's CPU flash kernel takes it: 2-D or 4-D. A mask of another rank
// broadcasts against the (batch, heads, query, key) scores from the right, as
// scaled_dot_product_attention broadcasts it: leading dimensions of one are added (a 3-D mask's
// first dimension is the heads').
at::Tensor host_attention_mask(const at::Tensor& mask) {
  at::Tensor h = host_alias(mask);
  if (h.dim() == 2 || h.dim() == 4) return h;
  while (h.dim() < 4) h = h.unsqueeze(0);
  return h;
}

// The sizes are compared as SymInts: torch.compile traces scaled_dot_product_attention on fake
// tensors with symbolic sizes, which asks this choice through the PrivateUse1 stub
// (fused_sdp_choice_stub below), and an int size would guard its symbol to its value (a Dynamo
// graph per sequence length). Comparing symbols guards only on how they relate.
bool fused_attention_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& mask, double dropout_p) {
  const auto dtype = q.scalar_type();
  const bool floating = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
  if (!(floating && k.scalar_type() == dtype && v.scalar_type() == dtype && q.dim() == 4 &&
        k.dim() == 4 && v.dim() == 4 && dropout_p == 0.0 && !q.is_nested() &&
        !(mask.has_value() && mask->defined() && mask->dim() > 4))) {
    return false;
  }
  const c10::SymIntArrayRef qs = q.sym_sizes(), ks = k.sym_sizes(), vs = v.sym_sizes();
  if (!(ks[1] > 0 && qs[1] % ks[1] == 0 && ks[1] == vs[1] && qs[0] == ks[0] &&
        ks[0] == vs[0] && qs[3] == ks[3] && ks[2] == vs[2])) {
    return false;
  }
  // A mask that does not broadcast against the (batch, heads, query, key) scores is refused by
  // the kernel: the math path then raises the CPU's error at the call (fused eager would record
  // the fused op and report it at a later, unrelated synchronization). Checked on concrete sizes
  // only: a traced graph's symbolic sizes are not specialized here.
  if (mask.has_value() && mask->defined() && !q.unsafeGetTensorImpl()->has_symbolic_sizes_strides() &&
      !mask->unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    const int64_t scores[4] = {q.size(0), q.size(1), q.size(2), k.size(2)};
    for (int64_t d = 1; d <= mask->dim(); ++d) {
      const int64_t m = mask->size(-d);
      if (m != 1 && m != scores[4 - d]) return false;
    }
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const auto& context = at::globalContext();
  const bool heads_ok =
      q.dim() != 4 || k.dim() != 4 || enable_gqa || q.sym_size(1) == k.sym_size(1);
  if (context.userEnabledOverrideableSDP() && heads_ok &&
      fused_attention_fits(q, k, v, mask, dropout_p)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  return static_cast<int64_t>(context.userEnabledMathSDP() ? at::SDPBackend::math
                                                           : at::SDPBackend::error);
}

// Grouped-query attention: query head h reads key/value head h / group. The host kernel takes
// the key and value heads repeated; their gradients are summed back over each group.
at::Tensor heads_repeated(const at::Tensor& x, int64_t group) {
  return group == 1 ? x : x.repeat_interleave(group, /*dim=*/1);
}
at::Tensor heads_summed(const at::Tensor& g, int64_t group) {
  if (group == 1) return g;
  return g.unflatten(1, {g.size(1) / group, group}).sum(2);
}

at::Tensor mxu_operand(const at::Tensor& x, sim::Precision precision) {
  return x.scalar_type() == at::kFloat && precision == sim::Precision::kDefault ? sim::bf16_hi(x)
                                                                                : x;
}

// PyTorch's CPU flash-attention kernels read each row of the head dimension as contiguous memory
// (its CPU dispatcher picks them only when the last stride is 1): a host alias whose head
// dimension is strided (q from a permute of a channels-first tensor, as diffusers' Cosmos VAE
// makes it) is copied to rows first.
at::Tensor rows_dense(const at::Tensor& x) {
  return x.stride(-1) == 1 ? x : x.contiguous();
}

// PyTorch's CPU flash-attention kernels take one head size for Q, K and V; multi-head latent
// attention (DeepSeek's MLA: query and key heads longer than value heads) has two. The host
// operands are padded with zeros to the longer one: zero columns of Q and K add nothing to the
// scores, zero columns of V (and of O and dO in the backward) give output and gradient columns
// that are cut off again. The scale stays the query's (1 / sqrt of its head size).
at::Tensor head_padded(const at::Tensor& x, int64_t to) {
  return x.size(-1) == to ? x : at::constant_pad_nd(x, {0, to - x.size(-1)});
}
double attention_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// The strides of a tensor of `sizes` laid out as `like` is (PyTorch's meta kernel for the fused
// attention ops does the same: alloc_with_matching_layout).
c10::DimVector strides_like(const at::Tensor& like, c10::IntArrayRef sizes) {
  if (like.sizes() == sizes) {  // empty_like(like.transpose(1, 2)).transpose(1, 2)
    const at::Tensor t = like.transpose(1, 2);
    c10::DimVector strides = t.is_non_overlapping_and_dense()
                                 ? c10::DimVector(t.strides())
                                 : c10::contiguous_strides(t.sizes());
    std::swap(strides[1], strides[2]);
    return strides;
  }
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> permuted;
  for (int64_t d : order) permuted.push_back(sizes[d]);
  const auto dense = c10::contiguous_strides(permuted);
  c10::DimVector strides(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) strides[order[i]] = dense[i];
  return strides;
}

at::Tensor device_like(const at::Tensor& like, c10::IntArrayRef sizes) {
  return at::empty_strided(sizes, strides_like(like, sizes), like.options());
}

// Whether PyTorch's CPU flash-attention kernels (at::native::flash_attention_kernel and its
// backward, which take their results as arguments) can write the results straight into the
// device tensors' memory, as they do when the checks of their CPU wrappers
// (_scaled_dot_product_flash_attention_for_cpu, its backward) pass and the results need no
// reshaping: one head size, no grouped-query heads, a float32 or query-typed mask of 2 or 4
// dimensions, and rows of `dense` (the results, and operands read as they are) contiguous.
// Otherwise the wrappers run and their results are copied: three copies fewer per backward and
// two per forward (docs/host-speed.md, "The fused attention and a linear layer's bias as the CPU
// runs them").
[[maybe_unused]] bool writes_in_place(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& h_mask,
                     std::initializer_list<const at::Tensor*> dense) {
  if (q.size(1) != k.size(1) || q.size(-1) != v.size(-1) || q.numel() == 0 || k.numel() == 0) {
    return false;
  }
  if (h_mask && (h_mask->dim() != 2 && h_mask->dim() != 4)) return false;
  if (h_mask && h_mask->scalar_type() != at::kFloat && h_mask->scalar_type() != q.scalar_type()) {
    return false;
  }
  for (const at::Tensor* t : dense) {
    if (t->stride(-1) != 1) return false;
  }
  return true;
}

// The gradient of an attention bias: the scores' gradient dS = P * (dP - D), with
// P = exp(scale * Q K^T + bias - lse) (the forward's row log-sum-exp), dP = dO V^T and
// D = rowsum(dO * O) as the flash backward forms them, summed over the dimensions along which the
// bias broadcasts against the (batch, heads, query, key) scores, in the bias's dtype. Q, K, V and
// dO enter the products as the MXU's passes take them (mxu_operand), in float32. The host forms
// the L x S matrices here; the chip would write dS out of VMEM as it forms it for dQ and dK (the
// cost model charges that write).
at::Tensor attention_bias_grad(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& bias, const at::Tensor& out,
                               const at::Tensor& logsumexp, bool is_causal, double scale,
                               sim::Precision precision) {
  const int64_t group = q.size(1) / k.size(1);
  auto operand = [&](const at::Tensor& x) { return mxu_operand(x, precision).to(at::kFloat); };
  const at::Tensor hq = operand(host_alias(q));
  const at::Tensor hk = operand(heads_repeated(host_alias(k), group));
  const at::Tensor hv = operand(heads_repeated(host_alias(v), group));
  const at::Tensor hgo = operand(host_alias(grad_out));
  const at::Tensor h_bias = host_attention_mask(bias);
  at::Tensor scores = at::matmul(hq, hk.transpose(-2, -1)).mul_(scale).add_(h_bias.to(at::kFloat));
  if (is_causal) {  // (the top-left triangle, as the flash kernels take it)
    const int64_t L = scores.size(-2), S = scores.size(-1);
    scores.masked_fill_(at::ones({L, S}, scores.options().dtype(at::kBool)).tril().logical_not(),
                        -std::numeric_limits<float>::infinity());
  }
  const at::Tensor lse = host_alias(logsumexp).unsqueeze(-1);
  // (a row whose every key is masked has no probability anywhere, hence no gradient)
  const at::Tensor p = scores.sub_(lse).exp_().masked_fill_(lse.isneginf(), 0);
  const at::Tensor d = hgo.mul(host_alias(out).to(at::kFloat)).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = at::matmul(hgo, hv.transpose(-2, -1)).sub_(d).mul_(p);
  return at::sum_to(ds, h_bias.sizes()).reshape(bias.sizes()).to(bias.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(fused_attention_fits(q, k, v, attn_bias, dropout_p),
              "_scaled_dot_product_fused_attention_overrideable on tpu takes 4-D float32, "
              "bfloat16 or float16 query, key and value (key/value heads dividing the query "
              "heads), no dropout and a mask of at most 4 dimensions; "
              "scaled_dot_product_attention picks the math path otherwise");
  TORCH_CHECK(!return_debug_mask, "tpu's fused attention keeps no attention weights "
              "(return_debug_mask=True): use the math path");
  const at::Tensor mask = attn_bias.has_value() ? *attn_bias : at::Tensor();
  check_same_device("aten::_scaled_dot_product_fused_attention_overrideable",
                    {&q, &k, &v, mask.defined() ? &mask : nullptr});
  wait_for_device(q.device());
  static const std::string kName = "aten::_scaled_dot_product_fused_attention_overrideable";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  const auto precision = sim::current_precision();
  std::optional<at::Tensor> h_mask;
  if (mask.defined()) h_mask = host_attention_mask(mask);
  const int64_t group = q.size(1) / k.size(1);  // grouped-query attention: query heads per KV head
  const int64_t head = std::max(q.size(-1), v.size(-1));
  std::vector<int64_t> out_sizes = q.sizes().vec();
  out_sizes.back() = v.size(-1);
  at::Tensor out = device_like(q, out_sizes);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  bool in_place = false;
#ifdef TORCHTPU_FLASH_STUBS
  in_place = writes_in_place(q, k, v, h_mask, {&out});
  if (in_place) {
    at::native::flash_attention_kernel(
        at::kCPU, host_alias(out).transpose(1, 2), host_alias(lse).transpose(1, 2),
        rows_dense(mxu_operand(host_alias(q), precision)),
        rows_dense(mxu_operand(host_alias(k), precision)),
        rows_dense(mxu_operand(host_alias(v), precision)), 0.0, is_causal, h_mask,
        attention_scale(q, scale));
  }
#endif
  if (!in_place) {
    auto [h_out, h_lse] = at::_scaled_dot_product_flash_attention_for_cpu(
        rows_dense(head_padded(mxu_operand(host_alias(q), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(k), group), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(v), group), precision), head)),
        0.0, is_causal, h_mask, attention_scale(q, scale));
    host_alias(out).copy_(h_out.narrow(-1, 0, v.size(-1)));
    host_alias(lse).copy_(h_lse);
  }
  sim::record("aten::_scaled_dot_product_fused_attention_overrideable",
              attention_estimate(q, k, v, mask, false));
  // (no dropout: the generator's seed and offset are never read, and left unset as CUDA's flash
  // kernel leaves them; filling them would cost two launches)
  const auto seed_options = q.options().dtype(at::kLong);
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(q.size(2)), c10::SymInt(k.size(2)),
          at::empty({}, seed_options), at::empty({}, seed_options), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "tpu's fused attention has no dropout");
  TORCH_CHECK(!(grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() == at::kBool),
              "_scaled_dot_product_fused_attention_overrideable_backward: a boolean mask has no "
              "gradient");
  check_same_device("aten::_scaled_dot_product_fused_attention_overrideable_backward",
                    {&grad_out, &q, &k, &v, &out, &logsumexp});
  wait_for_device(q.device());
  static const std::string kName =
      "aten::_scaled_dot_product_fused_attention_overrideable_backward";
  const runtime::metrics::HostTime timed(kName, /*lasting=*/true);
  const auto precision = sim::current_precision();
  std::optional<at::Tensor> h_mask;
  if (attn_bias.defined()) h_mask = host_attention_mask(attn_bias);
  const int64_t group = q.size(1) / k.size(1);
  const int64_t head = std::max(q.size(-1), v.size(-1));  // (see head_padded)
  // The gradients asked for, laid out as empty_like lays them out (as PyTorch's meta kernel
  // does, which fused eager and torch.compile plan with). The mask's is shaped so even when it
  // is not asked for (the meta kernel's result), and written only when it is.
  auto grad_like = [](bool wanted, const at::Tensor& t) {
    return wanted && t.defined() ? at::empty_like(t) : at::Tensor();
  };
  const at::Tensor dq = grad_like(grad_input_mask[0], q), dk = grad_like(grad_input_mask[1], k),
                   dv = grad_like(grad_input_mask[2], v), dmask = grad_like(true, attn_bias);
  bool in_place = false;
#ifdef TORCHTPU_FLASH_STUBS
  in_place = dq.defined() && dk.defined() && dv.defined() &&
             writes_in_place(q, k, v, h_mask, {&dq, &dk, &dv});
  if (in_place) {
    // The kernel adds each block's share to the gradients of the keys and values it read.
    const at::Tensor h_dq = host_alias(dq), h_dk = host_alias(dk), h_dv = host_alias(dv);
    h_dq.zero_();
    h_dk.zero_();
    h_dv.zero_();
    auto rows_first = [](const at::Tensor& x) { return x.transpose(1, 2); };
    at::native::flash_attention_backward_kernel(
        at::kCPU, rows_first(h_dq), rows_first(h_dk), rows_first(h_dv),
        rows_first(rows_dense(mxu_operand(host_alias(grad_out), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(q), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(k), precision))),
        rows_first(rows_dense(mxu_operand(host_alias(v), precision))),
        rows_first(rows_dense(host_alias(out))), rows_first(host_alias(logsumexp)), 0.0,
        is_causal, h_mask, attention_scale(q, scale));
  }
#endif
  if (!in_place) {
    auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        rows_dense(head_padded(mxu_operand(host_alias(grad_out), precision), head)),
        rows_dense(head_padded(mxu_operand(host_alias(q), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(k), group), precision), head)),
        rows_dense(head_padded(mxu_operand(heads_repeated(host_alias(v), group), precision), head)),
        rows_dense(head_padded(host_alias(out), head)), host_alias(logsumexp), 0.0, is_causal,
        h_mask, attention_scale(q, scale));
    if (dq.defined()) host_alias(dq).copy_(gq.narrow(-1, 0, q.size(-1)));
    if (dk.defined()) host_alias(dk).copy_(heads_summed(gk.narrow(-1, 0, k.size(-1)), group));
    if (dv.defined()) host_alias(dv).copy_(heads_summed(gv.narrow(-1, 0, v.size(-1)), group));
  }
  const bool bias_grad = grad_input_mask[3] && attn_bias.defined();
  if (bias_grad) {
    host_alias(dmask).copy_(attention_bias_grad(grad_out, q, k, v, attn_bias, out, logsumexp,
                                                is_causal, attention_scale(q, scale), precision));
  }
  sim::record("aten::_scaled_dot_product_fused_attention_overrideable_backward",
              attention_estimate(q, k, v, attn_bias, true, bias_grad));
  return {dq, dk, dv, dmask};
}

}  // namespace

std::optional<std::vector<at::Tensor>> attention_meta_results(
    const std::string& name, c10::ArrayRef<c10::IValue> args,
    std::vector<std::pair<size_t, c10::IValue>>* constants) {
  auto meta = [](c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
    return at::detail::empty_strided_meta(sizes, strides, dtype, std::nullopt, std::nullopt,
                                          std::nullopt);
  };
  auto like = [&](const at::Tensor& t) { return meta(t.sizes(), t.strides(), t.scalar_type()); };
  if (name == "aten::_scaled_dot_product_fused_attention_overrideable") {
    // (query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale) ->
    // (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
    //  debug_attn_mask)
    const at::Tensor& q = args[0].toTensor();
    const at::Tensor& k = args[1].toTensor();
    const at::Tensor& v = args[2].toTensor();
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return std::nullopt;
    std::vector<int64_t> out_sizes = q.sizes().vec();
    out_sizes.back() = v.size(-1);
    const std::vector<int64_t> lse_sizes{q.size(0), q.size(1), q.size(2)};
    constants->emplace_back(4, c10::IValue(q.size(2)));
    constants->emplace_back(5, c10::IValue(k.size(2)));
    return std::vector<at::Tensor>{
        meta(out_sizes, strides_like(q, out_sizes), q.scalar_type()),
        meta(lse_sizes, c10::contiguous_strides(lse_sizes), at::kFloat), at::Tensor(),
        at::Tensor(), at::Tensor(), at::Tensor(), meta({}, {}, at::kLong), meta({}, {}, at::kLong),
        at::Tensor()};
  }
  if (name == "aten::_scaled_dot_product_fused_attention_overrideable_backward") {
    // (grad_out, query, key, value, attn_bias, ...) -> (grad_q, grad_k, grad_v, grad_attn_bias),
    // each laid out as empty_like lays it out (the kernel's results are empty_like's): an
    // expanded mask (a causal mask broadcast over the batch) gives a dense gradient, not one
    // with its zero strides.
    auto empty_like_of = [&](const at::Tensor& t) { return at::empty_like(like(t)); };
    const at::Tensor& bias = args[4].isTensor() ? args[4].toTensor() : at::Tensor();
    return std::vector<at::Tensor>{empty_like_of(args[1].toTensor()),
                                   empty_like_of(args[2].toTensor()),
                                   empty_like_of(args[3].toTensor()),
                                   bias.defined() ? empty_like_of(bias) : at::Tensor()};
  }
  return std::nullopt;
}

int64_t fused_sdp_choice_stub(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const std::optional<at::Tensor>& mask, double dropout_p,
                              bool is_causal, std::optional<double> scale, bool enable_gqa) {
  return fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
}

std::optional<sim::Estimate> estimate_mxu_op(const std::string& name,
                                             c10::ArrayRef<c10::IValue> args,
                                             const std::vector<at::Tensor>& results) {
  const std::string base = name.substr(0, name.find('.'));
  auto arg = [&](size_t i) { return args[i].isTensor() ? args[i].toTensor() : at::Tensor(); };
  const at::Tensor out = results.empty() ? at::Tensor() : results[0];
  if (base == "aten::mm" || base == "aten::bmm" || base == "aten::_int_mm" ||
      base == "aten::dot" || base == "aten::vdot") {
    return estimate_product(at::Tensor(), arg(0), arg(1), out);
  }
  if (base == "aten::addmm" || base == "aten::baddbmm" || base == "aten::addmv") {
    return estimate_product(arg(0), arg(1), arg(2), out);
  }
  if (base == "aten::convolution_overrideable") {
    return estimate_convolution(arg(0), arg(1), args[2].isTensor() ? arg(2) : at::Tensor(), out,
                                args[6].toBool(), args[8].toInt());
  }
  if (base == "aten::_scaled_mm" && out.defined()) {
    return scaled_mm_estimate(arg(0), arg(1), out);
  }
  if (base == "aten::_scaled_dot_product_fused_attention_overrideable") {
    return attention_estimate(arg(0), arg(1), arg(2), args[3].isTensor() ? arg(3) : at::Tensor(),
                              false);
  }
  if (base == "aten::_scaled_dot_product_fused_attention_overrideable_backward") {
    const at::Tensor bias = args[4].isTensor() ? arg(4) : at::Tensor();
    const bool bias_grad = bias.defined() && args[5].to<std::vector<bool>>().at(3);
    return attention_estimate(arg(1), arg(2), arg(3), bias, true, bias_grad);
  }
  if (base == "aten::convolution_backward_overrideable") {
    const auto mask = args[9].to<std::vector<bool>>();
    return estimate_convolution_backward(arg(0), arg(1), arg(2), args[6].toBool(),
                                         args[8].toInt(), {mask[0], mask[1], mask[2]});
  }
  return std::nullopt;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", entry(TORCH_FN(mm_out), Capture::results_are_arguments));
  m.impl("bmm.out", entry(TORCH_FN(bmm_out), Capture::results_are_arguments));
  m.impl("addmm.out", entry(TORCH_FN(addmm_out), Capture::results_are_arguments));
  m.impl("baddbmm.out", entry(TORCH_FN(baddbmm_out), Capture::results_are_arguments));
  m.impl("addmv.out", entry(TORCH_FN(addmv_out), Capture::results_are_arguments));
  m.impl("dot", entry(TORCH_FN(dot_kernel), Capture::new_results));
  m.impl("vdot", entry(TORCH_FN(vdot_kernel), Capture::new_results));
  m.impl("_int_mm", entry(TORCH_FN(int_mm), Capture::new_results));
  m.impl("mm.dtype", entry(TORCH_FN(mm_dtype), Capture::new_results));
  m.impl("mm.dtype_out", entry(TORCH_FN(mm_dtype_out), Capture::results_are_arguments));
  m.impl("bmm.dtype", entry(TORCH_FN(bmm_dtype), Capture::new_results));
  m.impl("bmm.dtype_out", entry(TORCH_FN(bmm_dtype_out), Capture::results_are_arguments));
  m.impl("addmm.dtype", entry(TORCH_FN(addmm_dtype), Capture::new_results));
  m.impl("addmm.dtype_out", entry(TORCH_FN(addmm_dtype_out), Capture::results_are_arguments));
  m.impl("baddbmm.dtype", entry(TORCH_FN(baddbmm_dtype), Capture::new_results));
  m.impl("baddbmm.dtype_out",
         entry(TORCH_FN(baddbmm_dtype_out), Capture::results_are_arguments));
  m.impl("_int_mm.out", entry(TORCH_FN(int_mm_out), Capture::results_are_arguments));
  m.impl("convolution_overrideable",
         entry(TORCH_FN(convolution_overrideable), Capture::new_results));
  m.impl("convolution_backward_overrideable",
         entry(TORCH_FN(convolution_backward_overrideable), Capture::new_results));
  m.impl("_fused_sdp_choice", entry(TORCH_FN(fused_sdp_choice), Capture::none));
  m.impl("_scaled_mm", entry(TORCH_FN(scaled_mm), Capture::new_results));
  m.impl("_scaled_mm.out", entry(TORCH_FN(scaled_mm_out), Capture::none));
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         entry(TORCH_FN(fused_attention), Capture::new_results));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         entry(TORCH_FN(fused_attention_backward), Capture::new_results));
}

namespace {
thread_local bool result_in_host_memory = false;
}  // namespace

ResultInHostMemory::ResultInHostMemory() : previous_(result_in_host_memory) {
  result_in_host_memory = true;
}
ResultInHostMemory::~ResultInHostMemory() { result_in_host_memory = previous_; }
bool ResultInHostMemory::active() { return result_in_host_memory; }

}  // namespace torchtpu::aten

// The same choice for PyTorch's meta function of _fused_sdp_choice (fake tensors of device
// "tpu", as torch.compile traces them), which asks the PrivateUse1 dispatch stub.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchtpu::aten::fused_sdp_choice_stub)
}  // namespace at::native
