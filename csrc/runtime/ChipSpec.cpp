#include "runtime/ChipSpec.h"

#include "runtime/Env.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace torchtpu::runtime {
namespace {
constexpr int64_t GiB = int64_t(1) << 30;
constexpr int64_t MiB = int64_t(1) << 20;
}  // namespace

namespace {

// Where the figures come from (issue 46; benchmarks/calibration_set.py's CHIP_FACTS quotes each
// line these cite).
constexpr const char* kGcp = "cloud.google.com/tpu/docs/";
constexpr const char* kJax =
    "JAX's jax/_src/tpu_info.py (github.com/jax-ml/jax @1ebd186c), per-TensorCore table";
constexpr const char* kBook =
    "How to Scale Your Model, \"How to Think About TPUs\" (jax-ml.github.io/scaling-book/tpus)";
constexpr const char* kTokamax =
    "tokamax's kernel-tuning table, tokamax/_src/ops/experimental/kda/utils.py "
    "(github.com/openxla/tokamax @24175b72): Google code, not an official specification page";

void fact(ChipSpec& c, const char* figure, const std::string& value, const std::string& source,
          bool assumed = false) {
  c.facts.push_back({figure, value, source, assumed});
}

std::string mib(int64_t bytes) { return std::to_string(bytes / MiB) + " MiB"; }

// The multiply-adds per MXU cell per cycle on the 256 x 256 generations. With the published MXU
// counts (v6e: 2 per chip, Google Cloud's page; v7: 2 per TensorCore, JAX's table) and the
// clocks of tokamax's tuning table (1.75 and 2.2 GHz), peak = 2 x MXUs x 256^2 x clock is
// exactly half the published bf16 peak on both chips (918e12 / (2 x 2 x 65536 x 1.75e9) = 2.00;
// 2307e12 / (2 x 4 x 65536 x 2.2e9) = 2.00). Deriving the clock from the peak instead gives
// 3.5 and 4.4 GHz. torchtpu assumes each cell does two bf16 multiply-adds per cycle (equivalently,
// twice the published MXU count): the MXU time stays that of the published peak and the
// clock, which sets the VPU's rate, is the tuning table's. No public document says which.
constexpr const char* kTwoMacsAssumption =
    "assumed: with the published MXU count and the tuning table's clock, 2 x MXUs x 256^2 x clock "
    "is exactly half the published bf16 peak; torchtpu takes two multiply-adds per cell per cycle "
    "(equivalently twice the MXU count) so that both the peak and the clock hold (a clock derived "
    "from the peak would be 2x the tuning table's)";

// Achieved rates: the fraction of the peak a large bf16 GEMM reaches and of the HBM bandwidth a
// large copy reaches, from public microbenchmarks of the real chips (nothing fitted to the
// calibration set). The cost model runs the MXU at peak x mxu_efficiency and HBM at bandwidth x
// hbm_efficiency (sim/CostModel.h). Each measured rate is written as published over the peak it
// is a fraction of.
constexpr const char* kRecipes = "tpu-recipes (github.com/AI-Hypercomputer/tpu-recipes @c8cfe2f6) ";
constexpr const char* kDtypes =
    "; applied to int8 and fp8 matmuls at their peaks too (assumed: no published int8 or fp8 "
    "GEMM rate)";

void achieved_mxu(ChipSpec& c, double measured, double peak, const std::string& value,
                  const std::string& source, bool assumed) {
  c.mxu_efficiency = measured / peak;
  fact(c, "large-GEMM efficiency", value, source + kDtypes, assumed);
}

void achieved_hbm(ChipSpec& c, double measured, double peak, const std::string& value,
                  const std::string& source, bool assumed) {
  c.hbm_efficiency = measured / peak;
  fact(c, "HBM efficiency", value, source, assumed);
}

// v5e: XLA's 8192^3 bf16 matmul in JAX's Pallas matmul guide.
constexpr double kV5eGemm = 181.82317539503744e12, kV5ePeak = 197e12;
constexpr const char* kV5eGemmSource =
    "JAX's Pallas TPU matmul guide, docs/pallas/tpu/matmul.ipynb (github.com/jax-ml/jax "
    "@1082251c; docs.jax.dev/en/latest/pallas/tpu/matmul.html), run on a v5e: XLA's jnp.matmul "
    "of 8192^3 bf16, \"Matmul FLOP/s: 181823175395037.44\", \"FLOP/s utilization: 92.2960%\" "
    "(timed on the host: dispatch included, so a lower bound)";
// Ironwood's 8 GiB copy: the one published copy rate measured where the rate has levelled off
// (64 MiB to 8 GiB within 3%).
constexpr double kV7Copy = 6420.961823e9, kV7Bandwidth = 7.38e12;
constexpr const char* kV7CopySource =
    "microbenchmarks/ironwood/hbm/hbm.md, tpu7x-2x2x1: an 8 GiB copy, \"| 8589934592 | "
    "3210.480912 | 6420.961823 |\" GB/s per TensorCore / per chip, reads and writes counted";
constexpr const char* kHbmAssumed =
    "assumed: Ironwood's measured 0.870 applied (no published copy bandwidth for this chip; "
    "Ironwood's 8 GiB copy, ";

ChipSpec v4() {
  ChipSpec c{"v4", 128, 4, 2, 275e12, 275e12, 32 * GiB, 1.2e12, 16 * MiB, 8, 128,
             "cloud.google.com/tpu/docs/v4"};
  c.clock_hz = 1.05e9;
  c.mxu_macs_per_cell = 1;
  c.vpu_alus = 4;
  fact(c, "peak bf16", "275 TFLOP/s", std::string(kGcp) + "v4");
  fact(c, "peak int8", "275 TOP/s (no int8 rate above bf16)", std::string(kGcp) + "v4");
  fact(c, "HBM", "32 GiB, 1.2 TB/s", std::string(kGcp) + "v4");
  fact(c, "VMEM", mib(c.vmem_bytes) + " per TensorCore", kJax);
  fact(c, "MXUs", "4 per TensorCore, 128 x 128; 2 TensorCores", std::string(kGcp) + "v4");
  fact(c, "clock", "1.05 GHz",
       "assumed: derived from the published peak, 275e12 / (2 x 8 MXUs x 128^2); no clock in "
       "the documents cited here",
       true);
  fact(c, "MXU multiply-adds per cell per cycle", "1", "as the clock (derived)", true);
  fact(c, "VPU", "8 sublanes x 128 lanes", kJax);
  fact(c, "VPU ALUs per lane", "4",
       "assumed: the scaling book's figure for v5 (4 ALUs per lane and sublane); none for v4",
       true);
  achieved_mxu(c, kV5eGemm, kV5ePeak, "0.923: v5e's",
               "assumed: v5e's measured 0.923 applied (no published large-GEMM rate for v4; "
               "v5e's MXUs are the same 128 x 128 arrays): " + std::string(kV5eGemmSource),
               true);
  achieved_hbm(c, kV7Copy, kV7Bandwidth, "0.870: Ironwood's",
               kHbmAssumed + std::string(kRecipes) + kV7CopySource + ")", true);
  return c;
}

ChipSpec v5e() {
  ChipSpec c{"v5e", 128, 4, 1, 197e12, 394e12, 16 * GiB, 819e9, 128 * MiB, 8, 128,
             "cloud.google.com/tpu/docs/v5e"};
  c.clock_hz = 1.5e9;
  c.mxu_macs_per_cell = 1;
  c.vpu_alus = 4;
  fact(c, "peak bf16", "197 TFLOP/s", std::string(kGcp) + "v5e");
  fact(c, "peak int8", "394 TOP/s", std::string(kBook) + " (3.94e14; Google Cloud: 393 TOPs)");
  fact(c, "peak fp8", "none: fp8 runs at the bf16 rate",
       std::string(kJax) + ": fp8_ops_per_second=0, \"Not Available\"");
  fact(c, "HBM", "16 GiB, 819 GB/s", std::string(kGcp) + "v5e (JAX's table: 8.20e11 B/s)");
  fact(c, "VMEM", mib(c.vmem_bytes), kJax);
  fact(c, "MXUs", "4 per TensorCore, 128 x 128; 1 TensorCore", std::string(kGcp) + "v5e");
  fact(c, "clock", "1.5 GHz",
       std::string(kBook) + ": \"about 5e13 bf16 FLOPs/s per MXU at 1.5GHz on TPU v5e\"");
  fact(c, "MXU multiply-adds per cell per cycle", "1",
       "the clock and the peak: 197e12 / (2 x 4 x 128^2 x 1.5e9) = 1.00");
  fact(c, "VPU", "8 sublanes x 128 lanes", kJax);
  fact(c, "VPU ALUs per lane", "4",
       std::string(kBook) + ": \"Each (lane, sublane) pair on v5 contains 4 standard "
                            "floating-point ALUs\"");
  achieved_mxu(c, kV5eGemm, kV5ePeak, "0.923 (181.8 of 197 TFLOP/s, 8192^3 bf16)",
               kV5eGemmSource, false);
  achieved_hbm(c, kV7Copy, kV7Bandwidth, "0.870: Ironwood's",
               kHbmAssumed + std::string(kRecipes) + kV7CopySource + ")", true);
  return c;
}

ChipSpec v5p() {
  ChipSpec c{"v5p", 128, 4, 2, 459e12, 918e12, 95 * GiB, 2.765e12, 64 * MiB, 8, 128,
             "cloud.google.com/tpu/docs/v5p"};
  c.clock_hz = 1.75e9;
  c.mxu_macs_per_cell = 1;
  c.vpu_alus = 4;
  fact(c, "peak bf16", "459 TFLOP/s", std::string(kGcp) + "v5p");
  fact(c, "peak int8", "918 TOP/s", std::string(kJax) + ": int8_ops_per_second 9.18e14 per chip");
  fact(c, "peak fp8", "none above bf16: fp8 runs at the bf16 rate",
       std::string(kGcp) + "v5p (FP8 459 TFLOPs, the bf16 figure)");
  fact(c, "HBM", "95 GiB, 2765 GB/s", std::string(kGcp) + "v5p");
  fact(c, "VMEM", mib(c.vmem_bytes) + " per TensorCore", kJax);
  fact(c, "MXUs", "4 per TensorCore, 128 x 128; 2 TensorCores", std::string(kGcp) + "v5p");
  fact(c, "clock", "1.75 GHz",
       std::string(kBook) + ": \"A TPU v5p has a clock speed of about 1.75GHz\"");
  fact(c, "MXU multiply-adds per cell per cycle", "1",
       "the clock and the peak: 459e12 / (2 x 8 x 128^2 x 1.75e9) = 1.00");
  fact(c, "VPU", "8 sublanes x 128 lanes", kJax);
  fact(c, "VPU ALUs per lane", "4",
       std::string(kBook) + ": 8 x 128 x 4 ALUs x 2 cores x 1.75e9 = 1.4e13 FLOP/s");
  achieved_mxu(c, kV5eGemm, kV5ePeak, "0.923: v5e's",
               "assumed: v5e's measured 0.923 applied (no published large-GEMM rate for v5p; "
               "the same TPU v5 generation of 128 x 128 MXUs): " + std::string(kV5eGemmSource),
               true);
  achieved_hbm(c, kV7Copy, kV7Bandwidth, "0.870: Ironwood's",
               kHbmAssumed + std::string(kRecipes) + kV7CopySource + ")", true);
  return c;
}

ChipSpec v6e() {
  ChipSpec c{"v6e", 256, 2, 1, 918e12, 1836e12, 32 * GiB, 1.64e12, 128 * MiB, 8, 128,
             "cloud.google.com/tpu/docs/v6e"};
  c.clock_hz = 1.75e9;
  c.mxu_macs_per_cell = 2;
  c.vpu_alus = 4;
  fact(c, "peak bf16", "918 TFLOP/s", std::string(kGcp) + "v6e");
  fact(c, "peak int8", "1836 TOP/s", std::string(kGcp) + "v6e");
  fact(c, "peak fp8", "none above bf16: fp8 runs at the bf16 rate",
       std::string(kJax) + ": fp8_ops_per_second 9.20e14, the bf16 figure");
  fact(c, "HBM", "32 GiB, 1.64 TB/s", std::string(kJax) + " (1.64e12 B/s; Google Cloud: 1600 GBps)");
  fact(c, "VMEM", mib(c.vmem_bytes), kJax);
  fact(c, "MXUs", "2 per TensorCore, 256 x 256; 1 TensorCore",
       std::string(kGcp) + "v6e: \"Each TensorCore has 2 matrix-multiply units (MXU)\"");
  fact(c, "clock", "1.75 GHz", std::string(kTokamax) + ": TPU_V6E frequency_ghz=1.75");
  fact(c, "MXU multiply-adds per cell per cycle", "2", kTwoMacsAssumption, true);
  fact(c, "VPU", "8 sublanes x 128 lanes", std::string(kGcp) + "v6e");
  fact(c, "VPU ALUs per lane", "4",
       std::string(kTokamax) + ": tflops_fp32_1d=7.168 = 8 x 128 x 4 x 1.75e9");
  achieved_mxu(c, 827.474382048629e12, 918e12, "0.901 (827.5 of 918 TFLOP/s, 8192^3 bf16)",
               std::string(kRecipes) +
                   "microbenchmarks/README.md, benchmark_matmul.py --dim 8192 8192 8192 on a "
                   "v6e-1, bf16, timed from the profiler trace: \"TFLOPS: 827.474382048629\"",
               false);
  achieved_hbm(c, 1359.5960438266143e9, 1.64e12, "0.829 (1360 of 1640 GB/s, a 32 MiB copy)",
               std::string(kRecipes) +
                   "microbenchmarks/README.md, benchmark_hbm.py on a v6e-1: a 32 MiB bf16 copy, "
                   "\"bandwidth (GBps, median): 1359.5960438266143\", reads and writes counted "
                   "(the one published size; on Ironwood a 32 MiB copy reaches 0.94 of the 8 GiB "
                   "rate, so this may understate v6e's large copies)",
               false);
  return c;
}

ChipSpec v7() {
  ChipSpec c{"v7", 256, 2, 2, 2307e12, 2307e12, 192 * GiB, 7.38e12, 64 * MiB, 8, 128,
             "cloud.google.com/tpu/docs/tpu7x", 4614e12};
  c.clock_hz = 2.2e9;
  c.mxu_macs_per_cell = 2;
  c.vpu_alus = 4;
  fact(c, "peak bf16", "2307 TFLOP/s", std::string(kGcp) + "tpu7x");
  fact(c, "peak fp8", "4614 TFLOP/s", std::string(kGcp) + "tpu7x");
  // JAX's table has no int8 rate for v7 and its is_matmul_supported() lists no int8 operands:
  // XLA converts int8 operands before the MXU. bf16 holds every int8 value exactly (fp8 does
  // not), so an int8 matmul is priced as the bf16 matmul it becomes.
  fact(c, "peak int8", "2307 TOP/s: the bf16 rate",
       std::string(kJax) +
           ": int8_ops_per_second=0, \"Not Available\", and no int8 operands in "
           "is_matmul_supported(); torchtpu prices an int8 matmul as the bf16 matmul of its "
           "operands converted (exact: bf16 holds every int8 value, fp8 does not)",
       true);
  fact(c, "HBM", "192 GiB, 7.38 TB/s",
       std::string(kGcp) + "tpu7x (192 GiB); " + kJax + " (7.40e12 B/s per chip)");
  fact(c, "VMEM", mib(c.vmem_bytes) + " per TensorCore", kJax);
  fact(c, "MXUs", "2 per TensorCore, 256 x 256; 2 TensorCores",
       std::string(kJax) + ": num_mxus=2, mxu_column_size=256 (Google Cloud gives no count)");
  fact(c, "clock", "2.2 GHz",
       std::string(kTokamax) + ": TPU_V7 frequency_ghz=2.2 (the chip scales its clock: "
                               "DVFS; no clock on Google Cloud's page)");
  fact(c, "MXU multiply-adds per cell per cycle", "2", kTwoMacsAssumption, true);
  fact(c, "VPU", "8 sublanes x 128 lanes", kJax);
  fact(c, "VPU ALUs per lane", "4",
       std::string(kTokamax) + ": tflops_fp32_1d=9.0112 per TensorCore = 8 x 128 x 4 x 2.2e9");
  achieved_mxu(c, 956.3824592e12, 2307e12 / 2,
               "0.829 (956.4 of 1153.5 TFLOP/s per TensorCore, 32768^3 bf16)",
               "accelerator-microbenchmarks' Ironwood results, "
               "Ironwood/Ironwood_Microbenchmarks_readme.md, \"Results\", \"GEMM\" "
               "(github.com/AI-Hypercomputer/accelerator-microbenchmarks @v1.1-legacy; the "
               "benchmark tpu-recipes' Ironwood matmul recipe runs): gemm_multiple_run, bf16, "
               "m=n=k=32768: \"956.3824592\" TFLOP/s per device (one TensorCore; peak 2307 / 2); "
               "16384: 950.1 (0.824)",
               false);
  achieved_hbm(c, kV7Copy, kV7Bandwidth, "0.870 (6421 of 7380 GB/s, an 8 GiB copy)",
               std::string(kRecipes) + kV7CopySource, false);
  return c;
}

}  // namespace

const std::vector<ChipSpec>& all_chips() {
  // Every constant with its source, or the assumption where no public figure exists (the facts
  // of each chip; python -m torchtpu info prints them).
  static const std::vector<ChipSpec> chips = {v4(), v5e(), v5p(), v6e(), v7()};
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
