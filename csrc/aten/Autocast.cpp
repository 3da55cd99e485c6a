// Autocast for "tpu": torch.autocast("tpu") casts the ops of PyTorch's autocast policy lists
// (ATen/autocast_mode.h, the lists CUDA uses) for the AutocastPrivateUse1 dispatch key:
//   lower_precision_fp   matmuls, convolutions, linear, attention: to the autocast dtype;
//   fp32                 reductions, norms, losses, pow, exp, softmax...: to float32;
//   fp32_set_opt_dtype / fp32_append_dtype: their dtype argument set to float32;
//   promote              ops of several inputs: to the widest input dtype.
// Every other op falls through. The default autocast dtype on "tpu" is bfloat16 (the MXU's
// input type; float16 works too). binary_cross_entropy is refused as on CUDA.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on \"tpu\" (as on CUDA): their inputs in bfloat16 or float16 lose the "
              "precision the log needs. Use torch.nn.functional.binary_cross_entropy_with_logits "
              "or torch.nn.BCEWithLogitsLoss, which combine the sigmoid and the loss and are "
              "safe to autocast, or run the loss outside the autocast region.");
}

struct DefaultDtype {
  DefaultDtype() { at::autocast::set_autocast_dtype(at::kPrivateUse1, at::kBFloat16); }
} default_dtype;

}  // namespace

// (The signatures in PyTorch's op lists name these types unqualified.)
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TORCHTPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TORCHTPU_LOWER_PRECISION)
#define TORCHTPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TORCHTPU_FP32)
#define TORCHTPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TORCHTPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define TORCHTPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TORCHTPU_PROMOTE)
  m.impl("aten::binary_cross_entropy", TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace torchtpu::aten
