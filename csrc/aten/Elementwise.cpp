// Element-wise ops of TPU tensors of one floating dtype, one shape and contiguous strides (add,
// sub, mul and div of two such tensors or of one and a Python number; the structured unary
// float ops): the result is a contiguous tensor of that shape and dtype, made here without the
// TensorIterator that PyTorch's generic kernel of the functional and in-place variants builds
// over device tensors to find it (about 2 us an op: docs/host-speed.md); the out= kernel then
// runs, queued or recorded, as it would after that generic kernel. Any other call goes to that
// generic kernel itself (at::compositeexplicitautogradnonfunctional), with its checks and errors.
// (The element-wise fast path: docs/host-speed.md, "Dense element-wise results sized directly".
// These kernels are registered without the entry, as the composites they replace: the out=
// kernels they call are entries, counted, checked and recorded there.)
#include <ATen/core/Tensor.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sigmoid_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/tanh_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/exp_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/sqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/rsqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/neg_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/log_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/sin_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/cos_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/reciprocal_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/silu_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/erf_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/exp2_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/log1p_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/expm1_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/empty.h>
#include <c10/util/strides.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

bool dense_float(const at::Tensor& self) {
  const c10::ScalarType dtype = self.scalar_type();
  const bool floating = dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf ||
                        dtype == c10::kDouble;
  // Exactly the contiguous strides (size-1 dimensions too: TensorIterator orders dimensions by
  // stride), no conjugate or negative bit, not empty (TensorIterator gives an empty result
  // other strides: (0, 1, 0) for x + 1 of shape (2, 0, 1)).
  return floating && self.numel() != 0 &&
         self.strides().equals(c10::contiguous_strides(self.sizes())) && !self.is_neg() &&
         !self.is_conj();
}
// A Python number the binding wrapped (a 0-dim CPU tensor): it takes the tensor's dtype, unless
// it is complex.
bool wrapped_real_number(const at::Tensor& other) {
  return other.is_cpu() && other.dim() == 0 && other.unsafeGetTensorImpl()->is_wrapped_number() &&
         !c10::isComplexType(other.scalar_type());
}
bool same_dense_floats(const at::Tensor& self, const at::Tensor& other) {
  if (!self.is_privateuseone() || !dense_float(self)) return false;
  if (wrapped_real_number(other)) return true;
  return other.scalar_type() == self.scalar_type() && other.is_privateuseone() &&
         other.device() == self.device() && self.sizes().equals(other.sizes()) &&
         dense_float(other);
}
// In place: `other` is another storage, or the same elements of this one (TensorIterator refuses
// a partial overlap). (Storages are compared by identity: a pending storage of fused eager has
// no memory to compare yet.)
bool same_dense_floats_in_place(const at::Tensor& self, const at::Tensor& other) {
  return same_dense_floats(self, other) &&
         (self.storage().unsafeGetStorageImpl() != other.storage().unsafeGetStorageImpl() ||
          self.storage_offset() == other.storage_offset());
}
// (A complex or boolean alpha is refused by the generic kernel's checks: it goes there.)
bool plain_alpha(const c10::Scalar& alpha) { return !alpha.isComplex() && !alpha.isBoolean(); }

// add and sub (with alpha), mul and div: the functional and in-place variants, by the generic
// kernels they fall back to and the out= op they call.
using GenericAlpha = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const c10::Scalar&);
using GenericAlphaInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const c10::Scalar&);
using Generic = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
using GenericInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&);

template <GenericAlpha generic, class Out>
at::Tensor dense_with_alpha(const at::Tensor& self, const at::Tensor& other,
                            const c10::Scalar& alpha) {
  if (!same_dense_floats(self, other) || !plain_alpha(alpha)) return generic(self, other, alpha);
  at::Tensor out = at::empty(self.sizes(), self.options());
  Out::call(self, other, alpha, out);
  return out;
}
template <GenericAlphaInPlace generic, class Out>
at::Tensor& dense_with_alpha_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (!same_dense_floats_in_place(self, other) || !plain_alpha(alpha)) {
    return generic(self, other, alpha);
  }
  Out::call(self, other, alpha, self);
  return self;
}
template <Generic generic, class Out>
at::Tensor dense(const at::Tensor& self, const at::Tensor& other) {
  if (!same_dense_floats(self, other)) return generic(self, other);
  at::Tensor out = at::empty(self.sizes(), self.options());
  Out::call(self, other, out);
  return out;
}
template <GenericInPlace generic, class Out>
at::Tensor& dense_(at::Tensor& self, const at::Tensor& other) {
  if (!same_dense_floats_in_place(self, other)) return generic(self, other);
  Out::call(self, other, self);
  return self;
}

#define TORCHTPU_UNARY_FLOAT_OP(op)                                     \
  at::Tensor op##_dense(const at::Tensor& self) {                       \
    if (!dense_float(self)) {                                           \
      return at::compositeexplicitautogradnonfunctional::op(self);      \
    }                                                                   \
    at::Tensor out = at::empty(self.sizes(), self.options());           \
    at::_ops::op##_out::call(self, out);                                \
    return out;                                                         \
  }                                                                     \
  at::Tensor& op##_dense_(at::Tensor& self) {                           \
    if (!dense_float(self)) {                                           \
      return at::compositeexplicitautogradnonfunctional::op##_(self);   \
    }                                                                   \
    at::_ops::op##_out::call(self, self);                               \
    return self;                                                        \
  }
TORCHTPU_UNARY_FLOAT_OP(sigmoid)
TORCHTPU_UNARY_FLOAT_OP(tanh)
TORCHTPU_UNARY_FLOAT_OP(exp)
TORCHTPU_UNARY_FLOAT_OP(sqrt)
TORCHTPU_UNARY_FLOAT_OP(rsqrt)
TORCHTPU_UNARY_FLOAT_OP(neg)
TORCHTPU_UNARY_FLOAT_OP(log)
TORCHTPU_UNARY_FLOAT_OP(sin)
TORCHTPU_UNARY_FLOAT_OP(cos)
TORCHTPU_UNARY_FLOAT_OP(reciprocal)
TORCHTPU_UNARY_FLOAT_OP(silu)
TORCHTPU_UNARY_FLOAT_OP(erf)
TORCHTPU_UNARY_FLOAT_OP(exp2)
TORCHTPU_UNARY_FLOAT_OP(log1p)
TORCHTPU_UNARY_FLOAT_OP(expm1)
#undef TORCHTPU_UNARY_FLOAT_OP

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // (Composites: not entries. The out= kernels they call are: counted, checked, recorded.)
  namespace generic = at::compositeexplicitautogradnonfunctional;
  m.impl("add.Tensor", TORCH_FN((dense_with_alpha<&generic::add, at::_ops::add_out>)));
  m.impl("add_.Tensor", TORCH_FN((dense_with_alpha_<&generic::add_, at::_ops::add_out>)));
  m.impl("sub.Tensor", TORCH_FN((dense_with_alpha<&generic::sub, at::_ops::sub_out>)));
  m.impl("sub_.Tensor", TORCH_FN((dense_with_alpha_<&generic::sub_, at::_ops::sub_out>)));
  m.impl("mul.Tensor", TORCH_FN((dense<&generic::mul, at::_ops::mul_out>)));
  m.impl("mul_.Tensor", TORCH_FN((dense_<&generic::mul_, at::_ops::mul_out>)));
  m.impl("div.Tensor", TORCH_FN((dense<&generic::div, at::_ops::div_out>)));
  m.impl("div_.Tensor", TORCH_FN((dense_<&generic::div_, at::_ops::div_out>)));
  m.impl("sigmoid", TORCH_FN(sigmoid_dense));
  m.impl("sigmoid_", TORCH_FN(sigmoid_dense_));
  m.impl("tanh", TORCH_FN(tanh_dense));
  m.impl("tanh_", TORCH_FN(tanh_dense_));
  m.impl("exp", TORCH_FN(exp_dense));
  m.impl("exp_", TORCH_FN(exp_dense_));
  m.impl("sqrt", TORCH_FN(sqrt_dense));
  m.impl("sqrt_", TORCH_FN(sqrt_dense_));
  m.impl("rsqrt", TORCH_FN(rsqrt_dense));
  m.impl("rsqrt_", TORCH_FN(rsqrt_dense_));
  m.impl("neg", TORCH_FN(neg_dense));
  m.impl("neg_", TORCH_FN(neg_dense_));
  m.impl("log", TORCH_FN(log_dense));
  m.impl("log_", TORCH_FN(log_dense_));
  m.impl("sin", TORCH_FN(sin_dense));
  m.impl("sin_", TORCH_FN(sin_dense_));
  m.impl("cos", TORCH_FN(cos_dense));
  m.impl("cos_", TORCH_FN(cos_dense_));
  m.impl("reciprocal", TORCH_FN(reciprocal_dense));
  m.impl("reciprocal_", TORCH_FN(reciprocal_dense_));
  m.impl("silu", TORCH_FN(silu_dense));
  m.impl("silu_", TORCH_FN(silu_dense_));
  m.impl("erf", TORCH_FN(erf_dense));
  m.impl("erf_", TORCH_FN(erf_dense_));
  m.impl("exp2", TORCH_FN(exp2_dense));
  m.impl("exp2_", TORCH_FN(exp2_dense_));
  m.impl("log1p", TORCH_FN(log1p_dense));
  m.impl("log1p_", TORCH_FN(log1p_dense_));
  m.impl("expm1", TORCH_FN(expm1_dense));
  m.impl("expm1_", TORCH_FN(expm1_dense_));
}

}  // namespace torchtpu::aten
