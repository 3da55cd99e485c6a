#pragma once
// The TPU generations torchtpu can simulate, with their public figures (docs/design.md 4.1).
#include <torchtpu/torchtpu.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torchtpu::runtime {

// (The public API's chip description: torchtpu/torchtpu.h.)
using ChipSpec = torchtpu::Chip;

// Every known chip, in generation order.
const std::vector<ChipSpec>& all_chips();

// The chip named `name` ("v4", "v5e", "v5p", "v6e", "v7"); unknown names raise an error listing
// the known ones.
const ChipSpec& chip_by_name(const std::string& name);

// The chip this process simulates: TORCHTPU_CHIP, else the generation of ACCELERATOR_TYPE,
// default "v5e". Read once.
const ChipSpec& current_chip();

// Google Cloud's accelerator type in ACCELERATOR_TYPE (TorchTPU reads it): "v6e-4" is 4 v6e
// chips. Its number counts TensorCores for v4 and v5p ("v5p-8": 4 chips) and chips for the
// others; "v5litepod" names v5e, "tpu7x" v7. Nothing when unset; an error when malformed.
struct AcceleratorType {
  std::string chip;
  int64_t chips = 0;
};
std::optional<AcceleratorType> accelerator_type();

}  // namespace torchtpu::runtime
