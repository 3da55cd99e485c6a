// The matmul family on the simulated MXU: mm, bmm, addmm, baddbmm, addmv (mv), dot, vdot,
// _int_mm. PyTorch's matmul, linear and mv decompose into these. Each kernel checks its inputs
// with CPU's rules and messages, sizes its output, runs the product through sim::matmul (TPU
// numerics) and charges the launch to the cost model. dtypes the MXU does not take (float64,
// complex, integers other than int8) run the host kernel on the device memory instead, counted
// as a fallback.
#include "aten/Fallback.h"
#include "aten/HostAlias.h"
#include "runtime/Metrics.h"
#include "sim/Mxu.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
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

using runtime::metrics::count_op;

void check_dtypes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(), " != ",
              b.scalar_type());
}

void resize_out(const at::Tensor& out, c10::IntArrayRef sizes) {
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, sizes);
}

// The cost of the epilogue (scale and add) of addmm-like ops, fused into the matmul launch.
void add_epilogue(sim::Estimate& e, const at::Tensor& out, const at::Tensor& self) {
  const auto& model = sim::cost_model();
  e.vpu_s += model.vector(out.numel(), 2.0, 0).vpu_s;
  const double bias = sim::CostModel::padded_bytes(self.sizes(), self.element_size());
  e.hbm_bytes += bias;
  e.hbm_s += bias / model.chip().hbm_bytes_per_s;
}

// product = a @ b (host tensors) on the MXU, or on the host for dtypes it does not take.
// Returns false when the host ran it.
bool product(const std::string& op, const at::Tensor& a, const at::Tensor& b,
             const at::Tensor& product_out) {
  if (sim::mxu_supports(a.scalar_type())) {
    sim::matmul(a, b, product_out);
    return true;
  }
  note_fallback(op + " (" + std::string(c10::toString(a.scalar_type())) + ")",
                "uses a dtype the MXU does not take (it multiplies bf16, float32 in bf16 "
                "passes, float16 and int8); it runs on the host, in place on the device memory.");
  at::matmul_out(const_cast<at::Tensor&>(product_out), a, b);
  return false;
}

// out = beta * self + alpha * (a @ b), everything on the host aliases. `self` is broadcast.
void scaled_product(const std::string& op, const at::Tensor& self, const at::Tensor& a,
                    const at::Tensor& b, const c10::Scalar& beta, const c10::Scalar& alpha,
                    const at::Tensor& out) {
  const at::Tensor h_out = host_alias(out);
  const at::Tensor h_self = host_alias(self);
  const bool use_beta = !(beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0);
  // Writing the product straight into out would clobber self where they share memory.
  const bool direct = !use_beta || !out.is_alias_of(self);
  at::Tensor p = direct ? h_out : at::empty(h_out.sizes(), h_out.options());
  const bool on_mxu = product(op, host_alias(a), host_alias(b), p);
  if (!alpha.equal(1)) p.mul_(alpha);
  if (use_beta) {
    if (direct) {
      h_out.add_(h_self.mul(beta));
    } else {
      h_out.copy_(h_self.expand_as(h_out).mul(beta).add_(p));
    }
  }
  if (on_mxu) {
    auto e = sim::matmul_estimate(a, b, out);
    add_epilogue(e, out, self);
    sim::record(op, e);
  }
}

void plain_product(const std::string& op, const at::Tensor& a, const at::Tensor& b,
                   const at::Tensor& out) {
  if (product(op, host_alias(a), host_alias(b), host_alias(out))) {
    sim::record(op, sim::matmul_estimate(a, b, out));
  }
}

// ---------------------------------------------------------------------------------------------

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  count_op("aten::mm.out");
  check_same_device("aten::mm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  check_dtypes(self, mat2);
  resize_out(out, {self.size(0), mat2.size(1)});
  plain_product("aten::mm", self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  count_op("aten::bmm.out");
  check_same_device("aten::bmm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0), "batch1 and batch2 must have same number of batches, got ",
              self.size(0), " and ", mat2.size(0));
  TORCH_CHECK(self.size(2) == mat2.size(1), "Expected size for first two dimensions of batch2 tensor to be: [",
              self.size(0), ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  check_dtypes(self, mat2);
  resize_out(out, {self.size(0), self.size(1), mat2.size(2)});
  plain_product("aten::bmm", self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  count_op("aten::addmm.out");
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
  resize_out(out, sizes);
  scaled_product("aten::addmm", self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1,
                        const at::Tensor& batch2, const c10::Scalar& beta,
                        const c10::Scalar& alpha, at::Tensor& out) {
  count_op("aten::baddbmm.out");
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
  resize_out(out, sizes);
  scaled_product("aten::baddbmm", self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  count_op("aten::addmv.out");
  check_same_device("aten::addmv", {&self, &mat, &vec, &out});
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0),
              "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  check_dtypes(mat, vec);
  resize_out(out, {mat.size(0)});
  scaled_product("aten::addmv", self, mat, vec, beta, alpha, out);
  return out;
}

at::Tensor dot_kernel(const at::Tensor& self, const at::Tensor& tensor) {
  count_op("aten::dot");
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
  count_op("aten::vdot");
  check_same_device("aten::vdot", {&self, &other});
  note_fallback("aten::vdot (" + std::string(c10::toString(self.scalar_type())) + ")");
  return on_device(at::vdot(host_alias(self), host_alias(other)), self.device());
}

at::Tensor& int_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  count_op("aten::_int_mm.out");
  check_same_device("aten::_int_mm", {&self, &mat2, &out});
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "Expected self and mat2 to be 2D tensors");
  TORCH_CHECK(self.scalar_type() == at::kChar && mat2.scalar_type() == at::kChar,
              "_int_mm expects int8 operands, got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(out.scalar_type() == at::kInt, "_int_mm expects an int32 result, got ",
              out.scalar_type());
  resize_out(out, {self.size(0), mat2.size(1)});
  plain_product("aten::_int_mm", self, mat2, out);
  return out;
}

at::Tensor int_mm(const at::Tensor& self, const at::Tensor& mat2) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(at::kInt));
  int_mm_out(self, mat2, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("addmv.out", addmv_out);
  m.impl("dot", dot_kernel);
  m.impl("vdot", vdot_kernel);
  m.impl("_int_mm", int_mm);
  m.impl("_int_mm.out", int_mm_out);
}

}  // namespace torchtpu::aten
