// Result sizing (Recording.h): the sizes, strides and dtypes of what a recorded op returns, or
// of the empty out= tensor an element-wise kernel would resize, without running the op.
#include "aten/DryRun.h"
#include "defer/Recording.h"
#include "runtime/Metrics.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/result_type.h>
#include <c10/util/strides.h>

#include <algorithm>
#include <chrono>

namespace torchtpu::defer {

// An element-wise out= op given an empty out tensor (PyTorch's generic kernels of some
// non-structured ops, such as abs, pass `empty({0})`): the out tensor gets the broadcast shape of
// the inputs, contiguous, over a pending storage, as the kernel would resize it.
// The result an element-wise kernel's TensorIterator allocates for these inputs, as a meta
// tensor: their broadcast shape, laid out in the inputs' memory order (a transposed input makes
// a transposed result, as on the CPU). 0-d CPU tensors are scalars and take no part.
at::Tensor elementwise_result_meta(const std::vector<at::Tensor>& inputs, c10::ScalarType dtype) {
  at::Tensor meta_out = at::detail::empty_meta({0}, dtype, std::nullopt, std::nullopt,
                                               std::nullopt, std::nullopt);
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).resize_outputs(true);
  config.add_output(meta_out);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) continue;
    metas.push_back(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type(),
                                                   std::nullopt, std::nullopt, std::nullopt));
    config.add_const_input(metas.back());
  }
  config.build();
  return meta_out;
}

void size_elementwise_out(const c10::FunctionSchema& schema, const aten::OpTraits& traits,
                          c10::ArrayRef<c10::IValue> args, c10::Device device) {
  if (!traits.pointwise) return;
  int out_index = -1;
  at::DimVector shape;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (schema.arguments()[i].is_out()) {
      if (out_index >= 0 || !t.defined() || t.numel() != 0 || t.storage().nbytes() != 0 ||
          !t.device().is_privateuseone()) {
        return;
      }
      out_index = static_cast<int>(i);
    } else if (t.defined()) {
      shape = at::infer_size_dimvector(shape, t.sizes());
    }
  }
  if (out_index < 0) return;
  const at::Tensor& out = args[out_index].toTensor();
  // An empty result of the broadcast shape already (x + 1 of shape (2, 0, 1): PyTorch's generic
  // kernel made it (0, 1, 0)-strided) is not resized by the kernel: its strides stay.
  if (out.sizes() == c10::IntArrayRef(shape)) return;
  std::vector<at::Tensor> inputs;
  inputs.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor() && static_cast<int>(i) != out_index) inputs.push_back(args[i].toTensor());
  }
  // Inputs of the result's shape, all contiguous (CPU scalars aside): TensorIterator makes the
  // result contiguous too (its fast set-up), so no iterator over meta tensors is built.
  const bool plain = std::all_of(inputs.begin(), inputs.end(), [&](const at::Tensor& t) {
    return !t.defined() || (t.is_cpu() && t.dim() == 0) ||
           (t.sizes() == c10::IntArrayRef(shape) && t.is_contiguous());
  });
  at::DimVector strides;
  if (plain) {
    strides = c10::contiguous_strides(shape);
  } else {
    const at::Tensor meta_out = elementwise_result_meta(inputs, out.scalar_type());
    strides.assign(meta_out.strides().begin(), meta_out.strides().end());
    TORCH_INTERNAL_ASSERT(meta_out.sizes() == c10::IntArrayRef(shape));
  }
  at::Tensor pending = make_pending_tensor(device, shape, strides, out.scalar_type(),
                                           c10::multiply_integers(shape) * out.element_size());
  out.unsafeGetTensorImpl()->set_storage_keep_dtype(pending.storage());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(shape, strides);
}

namespace {

// Results of the hottest ops returning new tensors (OpTraits Sizing::rule), sized here as their
// CPU kernels size them (contiguous, in the input's dtype), instead of through their meta
// kernels, which are Python functions (slow, and they take the GIL). nullopt: the
// arguments are not a case of the rule; use the meta kernel.
std::optional<std::vector<at::Tensor>> sized_here(std::string_view name,
                                                  c10::ArrayRef<c10::IValue> args) {
  auto like = [](c10::IntArrayRef sizes, c10::ScalarType dtype) {
    return at::detail::empty_meta(sizes, dtype, std::nullopt, std::nullopt, std::nullopt,
                                  std::nullopt);
  };
  auto tensor = [&](size_t i) -> const at::Tensor* {
    return args[i].isTensor() && args[i].toTensor().defined() ? &args[i].toTensor() : nullptr;
  };
  if (name == "aten::native_layer_norm") {
    // (input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    const at::Tensor& x = args[0].toTensor();
    const auto normalized = args[1].toIntVector();
    const int64_t axis = x.dim() - static_cast<int64_t>(normalized.size());
    if (axis < 0) return std::nullopt;
    std::vector<int64_t> stat(x.sizes().begin(), x.sizes().begin() + axis);
    stat.resize(x.dim(), 1);
    return std::vector<at::Tensor>{like(x.sizes(), x.scalar_type()),
                                   like(stat, x.scalar_type()), like(stat, x.scalar_type())};
  }
  if (name == "aten::native_layer_norm_backward") {
    // (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    const at::Tensor& x = args[1].toTensor();
    const auto mask = args[7].to<std::vector<bool>>();
    const at::Tensor* w = tensor(5);
    const at::Tensor* b = tensor(6);
    if ((mask[1] && w == nullptr) || (mask[2] && b == nullptr)) return std::nullopt;
    return std::vector<at::Tensor>{
        mask[0] ? like(x.sizes(), x.scalar_type()) : at::Tensor(),
        mask[1] ? like(w->sizes(), w->scalar_type()) : at::Tensor(),
        mask[2] ? like(b->sizes(), b->scalar_type()) : at::Tensor()};
  }
  if (name == "aten::index_select") {
    // (self, dim, index)
    const at::Tensor& x = args[0].toTensor();
    if (x.dim() == 0) return std::nullopt;
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), x.dim());
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[dim] = args[2].toTensor().numel();
    return std::vector<at::Tensor>{like(sizes, x.scalar_type())};
  }
  if (name == "aten::embedding_dense_backward") {
    // (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    const at::Tensor& g = args[0].toTensor();
    if (g.dim() == 0) return std::nullopt;
    return std::vector<at::Tensor>{like({args[2].toInt(), g.size(-1)}, g.scalar_type())};
  }
  if (name == "aten::mse_loss") {
    // (self, target, reduction): the loss per element (broadcast), or its mean / sum
    const at::Tensor& x = args[0].toTensor();
    const at::Tensor& t = args[1].toTensor();
    const c10::ScalarType dtype = at::result_type(x, t);  // as TensorIterator promotes
    if (args[2].toInt() != 0) return std::vector<at::Tensor>{like({}, dtype)};
    return std::vector<at::Tensor>{like(at::infer_size(x.sizes(), t.sizes()), dtype)};
  }
  if (name == "aten::nansum" && args[1].isIntList() && args[1].toIntList().empty()) {
    // (self, dim, keepdim, dtype): the CPU kernel reduces every dimension for dim=[] (as sum
    // does); PyTorch's meta kernel reduces none, which recorded a result of the input's shape.
    const at::Tensor& x = args[0].toTensor();
    const c10::ScalarType dtype =
        !args[3].isNone() ? args[3].toScalarType()
        : c10::isIntegralType(x.scalar_type(), /*includeBool=*/true) ? c10::kLong
                                                                      : x.scalar_type();
    std::vector<int64_t> sizes;
    if (args[2].toBool()) sizes.assign(x.dim(), 1);
    return std::vector<at::Tensor>{like(sizes, dtype)};
  }
  if (name == "aten::mse_loss_backward") {
    // (grad_output, self, target, reduction)
    const at::Tensor& x = args[1].toTensor();
    return std::vector<at::Tensor>{like(x.sizes(), x.scalar_type())};
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<at::Tensor>> new_results_meta(
    const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name,
    const aten::OpTraits& traits, std::vector<std::pair<size_t, c10::IValue>>* constants) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  if (traits.sizing == aten::Sizing::like_input) {
    // (relu) The result is laid out as TensorIterator lays it out (like the input when dense),
    // in its dtype: no meta call.
    const at::Tensor& x = args[0].toTensor();
    return std::vector<at::Tensor>{
        x.is_non_overlapping_and_dense()
            ? at::detail::empty_strided_meta(x.sizes(), x.strides(), x.scalar_type(),
                                             std::nullopt, std::nullopt, std::nullopt)
            : elementwise_result_meta({x}, x.scalar_type())};
  }
  auto meta = traits.sizing == aten::Sizing::rule ? sized_here(name, args) : std::nullopt;
  if (!meta) meta = aten::attention_meta_results(name, args, constants);
  if (!meta) {
    // (Python meta kernels are slow and take the GIL: counted, with their time.)
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    meta = aten::meta_results(op, *stack, &why, constants);
    runtime::metrics::count("defer.meta_calls." + name);
    TORCHTPU_COUNT("defer.meta_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
  }
  return meta;
}

}  // namespace torchtpu::defer
