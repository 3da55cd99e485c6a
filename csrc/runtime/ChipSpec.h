#pragma once
// The TPU generations torchtpu can simulate, with their public figures (docs/design.md 4.1).
#include <cstdint>
#include <string>
#include <vector>

namespace torchtpu::runtime {

struct ChipSpec {
  std::string name;          // "v5e"
  int mxu_dim;               // systolic array side: 128 or 256
  int mxus_per_core;         // MXUs per TensorCore
  int tensor_cores;          // TensorCores per chip
  double bf16_flops;         // peak bf16 FLOP/s per chip
  double int8_ops;           // peak int8 (v7: fp8) OP/s per chip
  int64_t hbm_bytes;         // HBM capacity per chip
  double hbm_bytes_per_s;    // HBM bandwidth per chip
  int64_t vmem_bytes;        // VMEM (per TensorCore where the source gives it so)
  int vpu_sublanes = 8;      // VPU: 8 sublanes x 128 lanes on every generation
  int vpu_lanes = 128;
  std::string source;        // where the figures come from
};

// Every known chip, in generation order.
const std::vector<ChipSpec>& all_chips();

// The chip named `name` ("v4", "v5e", "v5p", "v6e", "v7"); unknown names raise an error listing
// the known ones.
const ChipSpec& chip_by_name(const std::string& name);

// The chip this process simulates: TORCHTPU_CHIP, default "v5e". Read once.
const ChipSpec& current_chip();

}  // namespace torchtpu::runtime
