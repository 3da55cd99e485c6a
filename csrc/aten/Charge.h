#pragma once
// How torchtpu's own kernels (Kernels.cpp, Random.cpp) charge the device work they launch to
// the cost model: one VPU pass over the tensor they write. A header of its own because kernels
// of several files charge this way; the ops the VPU executor runs are charged by
// charge_vpu_op (DryRun.h) instead.
#include "aten/OpTraits.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"

#include <ATen/core/Tensor.h>

namespace torchtpu::aten {

// Charges a launch of `op` that writes `t` (and reads `reads` more bytes) to the cost model, at
// the op's VPU units (OpTraits, found once per op: a static of the template).
template <const char* op>
void charge_vector(const at::Tensor& t, double reads = 0) {
  static const double units = op_traits(op).vpu_units;
  const double bytes =
      sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size())) + reads;
  sim::record(op, sim::cost_model().vector(t.numel(), units, bytes));
}

}  // namespace torchtpu::aten
