#pragma once
// The TPU generations torchtpu can simulate, with their public figures (docs/design.md 4.1).
#include <torchtpu/torchtpu.h>

#include <cstdint>
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

// The chip this process simulates: TORCHTPU_CHIP, default "v5e". Read once.
const ChipSpec& current_chip();

}  // namespace torchtpu::runtime
