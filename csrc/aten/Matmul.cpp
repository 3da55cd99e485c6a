// The matmul family on the simulated MXU: mm, bmm, addmm, baddbmm, addmv (mv), dot, vdot, _int_mm,
// their out_dtype overloads and fp8 _scaled_mm (convolutions: aten/Convolution.cpp; fused
// attention: aten/Attention.cpp). PyTorch's matmul, linear and mv decompose into these. Each kernel checks its inputs
// with CPU's rules and messages, sizes its output, runs the product through sim::matmul (TPU
// numerics) and charges the launch to the cost model; integers wider than int8 (and uint8) are
// int8 passes on the MXU (sim/Mxu.h). dtypes the MXU does not take (float64, complex, bool,
// uint16/32/64) run the host kernel on the device memory instead, counted as a fallback.

#include "aten/DryRun.h"
#include "aten/Products.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "sim/Mxu.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <c10/util/strides.h>

#include <cmath>
#include <limits>
#include <numeric>
#include "pytorch/Internals.h"
#include <ATen/ops/_scaled_mm.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmv.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
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

}  // namespace

// The cost of the epilogue (scale and add) of addmm-like ops, fused into the matmul launch.
void add_epilogue(sim::Estimate& e, const at::Tensor& out, const at::Tensor& self) {
  const auto& model = sim::cost_model();
  e = model.combine(
      e, model.vector(out.numel(), 2.0, sim::CostModel::padded_bytes(self.sizes(), self.element_size())));
}

namespace {

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
  if (on_mxu && one && a.equal(1) && sim::host_float32(precision) &&
      h_out.scalar_type() == at::kFloat && h_a.scalar_type() == at::kFloat && h_a.dim() == 2 &&
      h_b.dim() == 2 && h_self.dim() <= 2) {
    // float32 at "highest" with the host's float32 GEMM (the opt-in of sim/Mxu.h): PyTorch's CPU
    // addmm is that GEMM with the bias in its accumulator (laid into the result first, then a
    // GEMM with beta 1), as a linear layer on the CPU runs, rather than a second pass over the
    // result to add the bias.
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
                  "passes, float16, and integers in int8 passes); it runs on the host, in place "
                  "on the device memory.");
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

// The result sizes of each product, after the checks (and messages) of PyTorch's CPU kernels;
// the out_dtype overloads below check the same way.
std::vector<int64_t> mm_sizes(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  return {self.size(0), mat2.size(1)};
}

std::vector<int64_t> bmm_sizes(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0), "batch1 and batch2 must have same number of batches, got ",
              self.size(0), " and ", mat2.size(0));
  TORCH_CHECK(self.size(2) == mat2.size(1), "Expected size for first two dimensions of batch2 tensor to be: [",
              self.size(0), ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  return {self.size(0), self.size(1), mat2.size(2)};
}

void check_bias(const at::Tensor& self, const std::vector<int64_t>& sizes) {
  TORCH_CHECK(at::is_expandable_to(self.sizes(), sizes), "The expanded size of self ",
              self.sizes(), " must match the result size ", c10::IntArrayRef(sizes));
}

std::vector<int64_t> addmm_sizes(const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              mat1.size(0), "x", mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  return {mat1.size(0), mat2.size(1)};
}

std::vector<int64_t> baddbmm_sizes(const at::Tensor& batch1, const at::Tensor& batch2) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", batch1.size(0),
              ", ", batch1.size(2), "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
  return {batch1.size(0), batch1.size(1), batch2.size(2)};
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_same_device("aten::mm", {&self, &mat2, &out});
  const auto sizes = mm_sizes(self, mat2);
  check_dtypes(self, mat2);
  resize_out(out, sizes, self.scalar_type());
  plain_product("aten::mm", self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_same_device("aten::bmm", {&self, &mat2, &out});
  const auto sizes = bmm_sizes(self, mat2);
  check_dtypes(self, mat2);
  resize_out(out, sizes, self.scalar_type());
  plain_product("aten::bmm", self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("aten::addmm", {&self, &mat1, &mat2, &out});
  const auto sizes = addmm_sizes(mat1, mat2);
  check_dtypes(mat1, mat2);
  TORCH_CHECK(self.scalar_type() == mat1.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  check_bias(self, sizes);
  resize_out(out, sizes, mat1.scalar_type());
  product("aten::addmm", self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1,
                        const at::Tensor& batch2, const c10::Scalar& beta,
                        const c10::Scalar& alpha, at::Tensor& out) {
  check_same_device("aten::baddbmm", {&self, &batch1, &batch2, &out});
  const auto sizes = baddbmm_sizes(batch1, batch2);
  check_dtypes(batch1, batch2);
  check_bias(self, sizes);
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
  resize_out(out, mm_sizes(self, mat2), out_dtype);
  plain_product("aten::mm", self, mat2, out);
  return out;
}

at::Tensor& bmm_dtype_out(const at::Tensor& self, const at::Tensor& mat2,
                          c10::ScalarType out_dtype, at::Tensor& out) {
  check_out_dtype("aten::bmm", self, mat2, out_dtype, nullptr);
  if (out_dtype == self.scalar_type()) return bmm_out(self, mat2, out);
  check_same_device("aten::bmm", {&self, &mat2, &out});
  resize_out(out, bmm_sizes(self, mat2), out_dtype);
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
  const auto sizes = addmm_sizes(mat1, mat2);
  check_bias(self, sizes);
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
  const auto sizes = baddbmm_sizes(batch1, batch2);
  check_bias(self, sizes);
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

}  // namespace

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
  // (is_causal: argument 4, 11, 5 and 13 of the four ops' schemas)
  if (base == "aten::_scaled_dot_product_flash_attention") {  // (no mask)
    return attention_estimate(arg(0), arg(1), arg(2), at::Tensor(), false, false,
                              args[4].toBool());
  }
  if (base == "aten::_scaled_dot_product_flash_attention_backward") {
    return attention_estimate(arg(1), arg(2), arg(3), at::Tensor(), true, false,
                              args[11].toBool());
  }
  if (base == "aten::_scaled_dot_product_fused_attention_overrideable") {
    return attention_estimate(arg(0), arg(1), arg(2), args[3].isTensor() ? arg(3) : at::Tensor(),
                              false, false, args[5].toBool());
  }
  if (base == "aten::_scaled_dot_product_fused_attention_overrideable_backward") {
    const at::Tensor bias = args[4].isTensor() ? arg(4) : at::Tensor();
    const bool bias_grad = bias.defined() && args[5].to<std::vector<bool>>().at(3);
    return attention_estimate(arg(1), arg(2), arg(3), bias, true, bias_grad, args[13].toBool());
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
  m.impl("_scaled_mm", entry(TORCH_FN(scaled_mm), Capture::new_results));
  m.impl("_scaled_mm.out", entry(TORCH_FN(scaled_mm_out), Capture::none));
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

