#include "runtime/ChipSpec.h"

#include "runtime/Env.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace torchtpu::runtime {
namespace {
constexpr int64_t GiB = int64_t(1) << 30;
constexpr int64_t MiB = int64_t(1) << 20;
}  // namespace

const std::vector<ChipSpec>& all_chips() {
  // Figures from Google Cloud's public TPU system-architecture pages (cloud.google.com/tpu/docs:
  // "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e (Trillium)", "TPU7x (Ironwood)"), as collected in
  // docs/design.md 4.1.
  static const std::vector<ChipSpec> chips = {
      {"v4", 128, 4, 2, 275e12, 275e12, 32 * GiB, 1.2e12, 16 * MiB, 8, 128,
       "cloud.google.com/tpu/docs/v4"},
      {"v5e", 128, 4, 1, 197e12, 394e12, 16 * GiB, 819e9, 128 * MiB, 8, 128,
       "cloud.google.com/tpu/docs/v5e"},
      {"v5p", 128, 4, 2, 459e12, 918e12, 95 * GiB, 2.765e12, 64 * MiB, 8, 128,
       "cloud.google.com/tpu/docs/v5p"},
      {"v6e", 256, 2, 1, 918e12, 1836e12, 32 * GiB, 1.64e12, 128 * MiB, 8, 128,
       "cloud.google.com/tpu/docs/v6e"},
      {"v7", 256, 2, 2, 2307e12, 4614e12, 192 * GiB, 7.38e12, 64 * MiB, 8, 128,
       "cloud.google.com/tpu/docs/tpu7x", 4614e12},
  };
  return chips;
}

const ChipSpec& chip_by_name(const std::string& name) {
  std::string known;
  for (const auto& chip : all_chips()) {
    if (chip.name == name) return chip;
    known += (known.empty() ? "" : ", ") + chip.name;
  }
  TORCH_CHECK(false, "Unknown TPU chip '", name, "'. Known chips: ", known,
              ". Set TORCHTPU_CHIP to one of them.");
}

const ChipSpec& current_chip() {
  static const ChipSpec& chip = [&]() -> const ChipSpec& {
    if (auto name = env::get("TORCHTPU_CHIP")) return chip_by_name(*name);
    if (auto type = accelerator_type()) return chip_by_name(type->chip);
    return chip_by_name("v5e");
  }();
  return chip;
}

std::optional<AcceleratorType> accelerator_type() {
  auto text = env::get("ACCELERATOR_TYPE");
  if (!text || text->empty()) return std::nullopt;
  const size_t dash = text->rfind('-');
  std::string name = dash == std::string::npos ? "" : text->substr(0, dash);
  int64_t count = 0;
  try {
    size_t used = 0;
    const std::string number = dash == std::string::npos ? "" : text->substr(dash + 1);
    count = std::stoll(number, &used);
    if (used != number.size()) count = 0;
  } catch (const std::exception&) {
  }
  if (name == "v5litepod") name = "v5e";
  if (name == "tpu7x") name = "v7";
  TORCH_CHECK_VALUE(count >= 1 && !name.empty(),
                    "ACCELERATOR_TYPE is Google Cloud's accelerator type, a generation and a "
                    "count like 'v6e-4' or 'v5p-8'; got '", *text, "'");
  const ChipSpec& chip = chip_by_name(name);
  const bool counts_cores = name == "v4" || name == "v5p";
  return AcceleratorType{chip.name, counts_cores ? std::max<int64_t>(1, count / chip.tensor_cores)
                                                 : count};
}

}  // namespace torchtpu::runtime
