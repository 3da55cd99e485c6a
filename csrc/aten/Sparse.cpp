// Sparse tensors on tpu (docs/quantized.md, "Sparse tensors"): COO tensors (SparsePrivateUse1)
// and compressed ones (CSR, CSC, BSR, BSC: SparseCsrPrivateUse1) whose indices and values are
// dense tpu tensors in HBM, as CUDA's are CUDA tensors.
//
// Construction and metadata are PyTorch's device-generic implementations (the ones it registers
// for the meta device too); every op on them runs on the CPU through the counted layout fallback
// (Fallback.cpp): sparse kernels of the simulated chip are not modelled.
#include "aten/Entry.h"
#include "aten/Fallback.h"

#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

namespace torchtpu::aten {

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         entry(TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint), Capture::none));
  m.impl("_sparse_coo_tensor_with_dims",
         entry(TORCH_FN(at::native::new_with_dims_sparse), Capture::none));
  m.impl("empty.memory_format", entry(TORCH_FN(at::native::empty_sparse), Capture::none));
  m.impl("empty_like", entry(TORCH_FN(at::native::empty_like_sparse_coo), Capture::none));
  m.impl("_indices", entry(TORCH_FN(at::native::_indices_sparse), Capture::none));
  m.impl("_values", entry(TORCH_FN(at::native::_values_sparse), Capture::none));
  m.impl("indices", entry(TORCH_FN(at::native::indices_sparse), Capture::none));
  m.impl("values", entry(TORCH_FN(at::native::values_sparse), Capture::none));
  m.impl("sparse_dim", entry(TORCH_FN(at::native::sparse_dim_sparse), Capture::none));
  m.impl("dense_dim", entry(TORCH_FN(at::native::dense_dim_sparse), Capture::none));
  m.impl("_dimI", entry(TORCH_FN(at::native::sparse_dim_sparse), Capture::none));
  m.impl("_dimV", entry(TORCH_FN(at::native::dense_dim_sparse), Capture::none));
  m.impl("_nnz", entry(TORCH_FN(at::native::_nnz_sparse), Capture::none));
  m.impl("is_coalesced", entry(TORCH_FN(at::native::is_coalesced_sparse), Capture::none));
  m.impl("_coalesced_", entry(TORCH_FN(at::native::_coalesced_sparse_), Capture::none));
  m.impl("sparse_resize_", entry(TORCH_FN(at::native::sparse_resize_), Capture::none));
  m.impl("sparse_resize_and_clear_",
         entry(TORCH_FN(at::native::sparse_resize_and_clear_), Capture::none));
  m.impl("copy_sparse_to_sparse_", entry(TORCH_FN(at::native::copy_sparse_), Capture::none));
  m.impl("zero_", entry(TORCH_FN(at::native::zero_sparse_), Capture::none));
  m.impl("copy_", entry(TORCH_FN(at::native::copy_sparse_wrapper_), Capture::none));
  m.impl("clone", entry(TORCH_FN(at::native::clone_sparse), Capture::none));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format",
         entry(TORCH_FN(at::native::empty_sparse_compressed), Capture::none));
  m.impl("empty_like", entry(TORCH_FN(at::native::empty_like_sparse_csr), Capture::none));
  m.impl("crow_indices", entry(TORCH_FN(at::native::crow_indices_sparse_csr), Capture::none));
  m.impl("col_indices", entry(TORCH_FN(at::native::col_indices_sparse_csr), Capture::none));
  m.impl("ccol_indices", entry(TORCH_FN(at::native::ccol_indices_sparse_csr), Capture::none));
  m.impl("row_indices", entry(TORCH_FN(at::native::row_indices_sparse_csr), Capture::none));
  m.impl("values", entry(TORCH_FN(at::native::values_sparse_csr), Capture::none));
  m.impl("sparse_dim", entry(TORCH_FN(at::native::sparse_dim_sparse_csr), Capture::none));
  m.impl("dense_dim", entry(TORCH_FN(at::native::dense_dim_sparse_csr), Capture::none));
  m.impl("_nnz", entry(TORCH_FN(at::native::_nnz_sparse_csr), Capture::none));
  m.impl("copy_", entry(TORCH_FN(at::native::copy_sparse_compressed_), Capture::none));
  m.impl("clone", entry(TORCH_FN(at::native::clone_sparse_compressed), Capture::none));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(entry_boxed<&layout_fallback>(Capture::fallback));
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(entry_boxed<&layout_fallback>(Capture::fallback));
}

namespace {
// Every other op the CPU runs on sparse tensors runs on tpu through the fallback, as the CPU runs
// it (after the registrations above: statics of one file are made in order).
const bool g_sparse_ops_routed = [] {
  route_to_layout_fallback(c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1);
  route_to_layout_fallback(c10::DispatchKey::SparseCsrCPU,
                           c10::DispatchKey::SparseCsrPrivateUse1);
  return true;
}();
}  // namespace

}  // namespace torchtpu::aten
