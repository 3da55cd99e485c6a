#pragma once
// torchtpu's public C++ API for LibTorch programs.
//
// Linking libtorchtpu registers the "tpu" device with PyTorch (PrivateUse1 renamed to "tpu"),
// its allocator, guard, hooks, generator, kernels and CPU fallback. Call torchtpu::init() once
// (it also makes sure the linker keeps the library), then use torch::Device("tpu:0") as any
// other device.
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace torchtpu {

// Registers everything; idempotent. Returns the number of simulated devices.
int init();

// Number of simulated TPU devices this process sees (TORCHTPU_NUM_DEVICES, default 4, or the
// chips listed in TPU_VISIBLE_CHIPS), and the host's chip behind a device index.
int device_count();
int64_t physical_chip(int device);

// The simulated chip generation ("v5e", ...; TORCHTPU_CHIP) and its HBM capacity per device.
std::string chip_name();
int64_t hbm_capacity_bytes();

// One constant of a chip with where it comes from: a public document, or (assumed) the
// assumption torchtpu makes where no public figure exists (python -m torchtpu info lists them).
struct ChipFact {
  std::string figure;    // "clock"
  std::string value;     // "1.75 GHz"
  std::string source;    // the document and what it says, or the assumption and its reason
  bool assumed = false;  // no public source: a stated assumption
};

// A TPU generation's figures, as the cost model uses them (docs/simulated-chip.md, "Cost model").
struct Chip {
  std::string name;        // "v5e"
  int mxu_dim;             // systolic array side: 128 or 256
  int mxus_per_core;       // MXUs per TensorCore
  int tensor_cores;        // TensorCores per chip
  double bf16_flops;       // peak bf16 FLOP/s per chip
  double int8_ops;         // peak int8 OP/s per chip (v7: no int8 MXU path, its bf16 rate)
  int64_t hbm_bytes;       // HBM capacity per chip
  double hbm_bytes_per_s;  // HBM bandwidth per chip
  int64_t vmem_bytes;      // VMEM
  int vpu_sublanes = 8;    // VPU: 8 sublanes x 128 lanes on every generation
  int vpu_lanes = 128;
  std::string source;      // where the figures come from
  double fp8_ops = 0;      // peak fp8 FLOP/s per chip; 0: no native fp8 (fp8 runs at bf16 rate)
  double clock_hz = 0;     // TensorCore clock
  // Multiply-adds per MXU cell per cycle: bf16_flops = 2 x mxus x mxu_dim^2 x this x clock
  // (1 on the 128 x 128 generations; 2 on v6e and v7, an assumption: ChipSpec.cpp).
  int mxu_macs_per_cell = 1;
  int vpu_alus = 4;        // ALUs per (sublane, lane) of the VPU, one operation per cycle each
  // Achieved rates, from public microbenchmarks of the real chip (ChipSpec.cpp): the fraction
  // of its peak a large GEMM reaches, and of its HBM bandwidth a large copy reaches. The cost
  // model runs the MXU at peak x mxu_efficiency and HBM at bandwidth x hbm_efficiency.
  double mxu_efficiency = 1.0;
  double hbm_efficiency = 1.0;
  std::vector<ChipFact> facts;  // each constant above with its source or assumption
  // The VPU's peak rate, operations per second per chip: sublanes x lanes x ALUs x clock x cores.
  double vpu_ops() const {
    return double(vpu_sublanes) * vpu_lanes * vpu_alus * clock_hz * tensor_cores;
  }
};
Chip chip();                    // the simulated generation
std::vector<Chip> all_chips();  // every known generation, in order

// Waits for all work queued on a device (-1: the current device); in fused eager, runs the
// pending graph first.
void synchronize(int device = -1);

// The eager mode: "strict" (default), "debug" or "fused" (DeferAndFuse; docs/eager-modes.md).
// Leaving fused eager runs everything it recorded. TORCHTPU_EAGER_MODE sets the initial mode.
void set_eager_mode(const std::string& mode);
std::string eager_mode();

// Counters of torchtpu.metrics: native ops, CPU fallbacks, and other counters, by name.
std::map<std::string, int64_t> native_op_counts();
std::map<std::string, int64_t> fallback_counts();
std::map<std::string, int64_t> counters();
void reset_metrics();

// Bytes allocated / reserved / peak allocated on a device by the simulated HBM allocator.
int64_t memory_allocated(int device);
int64_t memory_reserved(int device);
int64_t max_memory_allocated(int device);

inline c10::Device device(int index = 0) {
  return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
}

}  // namespace torchtpu
