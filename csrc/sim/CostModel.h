#pragma once
// The cost model of docs/design.md 4.3: what a launch would take on the simulated chip.
//
//   T = max(T_mxu, T_vpu, T_hbm) + T_launch
//
// - T_mxu from MXU cycles: the matmul is cut into S x S weight tiles (S = MXU width), spread
//   over all MXUs of the chip; each MXU streams M' rows (M padded to the sublane tile) per tile
//   with the next tile's weights loaded behind the current one (double buffering), plus one
//   weight load at the start and one drain at the end. A tile run alone takes exactly the
//   cycles of the cycle-level systolic reference (sim/Reference.h): tile_cycles().
// - T_vpu: each element-wise op costs `units` VPU operations per element, counted per (8 x 128)
//   vreg; each TensorCore retires `vpu_alus` vreg operations per cycle (4 ALUs per lane and
//   sublane) at the chip clock: the chip's published VPU rate (runtime/ChipSpec.cpp).
// - T_hbm: bytes moved, padded to the (8, 128) memory tiles ((16, 128) for 16-bit, (32, 128) for
//   8-bit types), at the achieved HBM bandwidth: the published one x hbm_efficiency (what a
//   large copy reaches on the real chip: runtime/ChipSpec.cpp).
// - T_launch: a cost per launch (an assumption, not a published figure: 2 us unless
//   TORCHTPU_LAUNCH_US says otherwise, for every chip or per chip; CostModel::Options).
// - int8 matmuls run at the chip's int8 rate (v7 has no int8 MXU path: its bf16 rate), fp8 at
//   its fp8 rate where it has one (v7) and at the bf16 rate elsewhere (MxuRate).
// - float64 and complex work is emulated on the VPU: its cycles times the emulation factor (an
//   assumption: about ten float32 operations per operation; TORCHTPU_EMULATION_FACTOR).
//
// Every charge goes through this class: kernels describe a launch (elements, VPU units per vreg,
// padded bytes, emulated or not, matmul shapes) and the model owns every formula.
//
// The MXU's peak is the published bf16 peak: bf16_flops / (2 S^2 x MXUs) row steps per second
// (each S x S array takes one row of M per step), which is clock x mxu_macs_per_cell within the
// rounding of the published figures (a test checks it for every chip). Matmuls run at the
// achieved rate, peak x mxu_efficiency: the fraction of its peak a large GEMM reaches on the
// real chip (a published microbenchmark, or the assumption written next to the constant). The
// tile model's cycles (padding to S x S tiles and the sublane tile, weight load, fill and drain)
// are counted as before and all run at that rate, so a large matmul takes work / (peak x
// efficiency) and a small one keeps its padding and fill on top. The VPU runs at the clock of
// the chip table, which has its source or assumption next to it.
#include "runtime/ChipSpec.h"

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>

namespace torchtpu::sim {

// The rate class of a matmul on the MXU: bf16-like (bf16, float16, float32 in bf16 passes) at
// the chip's bf16 peak, int8 at its int8 peak, fp8 at its fp8 peak where the chip has native fp8
// (v7) and at the bf16 rate elsewhere (the operands widened to bf16: an assumption).
enum class MxuRate : uint8_t { bf16 = 0, int8 = 1, fp8 = 2 };

// One matmul of a launch, as the chip-independent facts the MXU time is priced from.
struct MatmulWork {
  int64_t batch = 0, M = 0, K = 0, N = 0;
  int32_t passes = 1;
  int32_t element_bytes = 2;
  MxuRate rate = MxuRate::bf16;
  bool operator==(const MatmulWork& o) const {
    return batch == o.batch && M == o.M && K == o.K && N == o.N && passes == o.passes &&
           element_bytes == o.element_bytes && rate == o.rate;
  }
};

// What a launch does, independent of the chip: its matmuls, its VPU work (units x vregs of
// 8 x 128 elements, the emulation factor included), its tile-padded HBM bytes and how many
// launches it is. The ledger keeps these, so a run can be priced for any chip afterwards
// (sim/Ledger.h); CostModel::price turns one into an Estimate for its chip.
// A collective over the chips of a slice (c10d through torchtpu.distributed): its kind, the
// bytes of the whole (gathered / reduced) array, and the number of chips in the group.
enum class CollectiveKind : uint8_t {
  none = 0, all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv,
  barrier
};
struct CollectiveWork {
  CollectiveKind kind = CollectiveKind::none;
  double bytes = 0;
  int32_t chips = 1;
  bool operator==(const CollectiveWork& o) const {
    return kind == o.kind && bytes == o.bytes && chips == o.chips;
  }
};

struct Work {
  c10::SmallVector<MatmulWork, 1> matmuls;
  CollectiveWork collective;  // a collective's launch (its ICI time)
  double vpu_units = 0;
  double hbm_bytes = 0;
  int64_t launches = 0;
  // The op ran through a host fallback; it is priced as if it were native (and flagged).
  bool priced_as_native = false;
  bool operator==(const Work& o) const {
    return vpu_units == o.vpu_units && hbm_bytes == o.hbm_bytes && launches == o.launches &&
           priced_as_native == o.priced_as_native && matmuls == o.matmuls &&
           collective == o.collective;
  }
  Work& operator+=(const Work& other);  // a region of several parts: everything adds up
};

struct Estimate {
  double mxu_s = 0, vpu_s = 0, hbm_s = 0, ici_s = 0, launch_s = 0;
  double flops = 0;             // useful FLOPs (2MKN per matmul, x passes not included)
  // The matmuls' time at the peak of the dtype each ran in (bf16, int8 or fp8): the time they
  // would take at the chip's peak; fraction of peak = peak_s / seconds.
  double peak_s = 0;
  double mxu_flops = 0;         // FLOPs the MXUs execute: padded shapes x passes
  double hbm_bytes = 0;         // tile-padded bytes moved
  int64_t launches = 0;
  Work work;                    // what was priced (the ledger re-prices it for other chips)

  double seconds() const;
  // Which term bounds the launch: "mxu", "vpu", "hbm" or "ici".
  const char* bound() const;
  Estimate& operator+=(const Estimate& other);  // sums terms (for a region of several parts)
};

// "4x4" or "2x2x4": chips per torus axis (a ValueError naming the format otherwise).
c10::SmallVector<int64_t, 3> parse_topology(const std::string& text);

// The assumptions of the cost model (not published figures), configurable per model.
struct CostOptions {
  double launch_seconds = 2e-6;
  double emulation_factor = 10.0;
  // The slice's ICI topology, chips per torus axis ({4, 4}: a 4x4 slice). Empty: each
  // collective's group is one ring of its own along one axis (sim/CostModel.cpp, "ICI").
  c10::SmallVector<int64_t, 3> topology;
  // TORCHTPU_LAUNCH_US (one figure, or per chip: "v5e:2,v7:1"), TORCHTPU_EMULATION_FACTOR,
  // TORCHTPU_TOPOLOGY ("4x4", or per chip: "v5e:4x4,v5p:2x2x4"), else the defaults above;
  // for the chip named `chip`.
  static CostOptions from_environment(const std::string& chip);
};

class CostModel {
 public:
  using Options = CostOptions;
  explicit CostModel(const runtime::ChipSpec& chip, Options options = Options());

  double launch_seconds() const { return options_.launch_seconds; }
  double emulation_factor() const { return options_.emulation_factor; }
  const c10::SmallVector<int64_t, 3>& topology() const { return options_.topology; }
  const runtime::ChipSpec& chip() const { return *chip_; }
  double clock_hz() const { return clock_hz_; }
  // MXU row steps per second at the published bf16 peak: bf16_flops / (2 S^2 x MXUs).
  double mxu_cycles_per_s() const { return mxu_cycles_per_s_; }
  // The fractions of the peaks matmuls and HBM traffic run at (runtime/ChipSpec.cpp).
  double mxu_efficiency() const { return chip_->mxu_efficiency; }
  double hbm_efficiency() const { return chip_->hbm_efficiency; }
  // VPU vreg operations per second: clock x TensorCores x ALUs per lane.
  double vpu_units_per_s() const { return clock_hz_ * chip_->tensor_cores * chip_->vpu_alus; }
  // The peak rate of a matmul's dtype class on this chip (FLOP/s or OP/s).
  double peak_of(MxuRate rate) const;
  int mxus() const { return chip_->mxus_per_core * chip_->tensor_cores; }

  // One weight tile run alone on a weight-stationary S x S array: weight load, skewed
  // streaming of M rows and drain (equals the cycle-level reference's count).
  static int64_t tile_cycles(int64_t M, int64_t Nt, int S);
  // Cycles of a [batch] x (M x K) @ (K x N) matmul on all MXUs of the chip, one pass.
  int64_t mxu_cycles(int64_t batch, int64_t M, int64_t K, int64_t N, int element_bytes) const;

  // Padded bytes of a tensor with these sizes in HBM.
  static double padded_bytes(c10::IntArrayRef sizes, int element_bytes);

  // The estimate of `work` on this chip.
  Estimate price(const Work& work) const;
  // VPU units x vregs of `units` per vreg over `elements` (times the emulation factor when
  // `emulated`: float64 or complex).
  double vpu_units(int64_t elements, double units, bool emulated = false) const;

  // A matmul launch: MXU work plus the bytes of its operands and result (already padded).
  Estimate matmul(int64_t batch, int64_t M, int64_t K, int64_t N, int passes,
                  int element_bytes, double hbm_bytes, MxuRate rate = MxuRate::bf16) const;
  // Element-wise / reduction work: `units` VPU cycles per vreg over `elements` (times the
  // emulation factor when `emulated`: float64 or complex).
  Estimate vector(int64_t elements, double units, double hbm_bytes, bool emulated = false) const;
  // A collective over `chips` chips of a slice of this chip (sim/CostModel.cpp, "ICI").
  Estimate collective(CollectiveKind kind, double bytes, int64_t chips) const;
  // VPU units of one op, emulated or not (a fused region adds up its ops' units).
  double units(double units, bool emulated) const {
    return emulated ? units * options_.emulation_factor : units;
  }
  // One launch made of two parts (a matmul and its element-wise epilogue, a fused region and
  // its final reduction): MXU and VPU time and FLOPs add up, HBM bytes add up less
  // `kept_bytes` (values that stay inside the launch), one launch cost.
  Estimate combine(const Estimate& a, const Estimate& b, double kept_bytes = 0) const;

 private:
  double rate_factor(MxuRate rate) const;
  double ici_seconds(const CollectiveWork& c) const;
  const runtime::ChipSpec* chip_;
  double clock_hz_;
  double mxu_cycles_per_s_;
  Options options_;
};

// The model of the chip this process simulates.
const CostModel& cost_model();

// Charges one launch: adds its work to the ledger (sim/Ledger.h: torchtpu.metrics.estimate()
// prices it for any chip) and, while the profiler records the device, puts it on the device
// timeline. While a RecordCollector is alive on this thread, the launch goes to that collector
// instead (a fused region charges the parts it runs through ordinary kernels as one launch).
void record(const std::string& op, const Estimate& estimate);

class RecordCollector {
 public:
  RecordCollector();
  ~RecordCollector();
  RecordCollector(const RecordCollector&) = delete;
  RecordCollector& operator=(const RecordCollector&) = delete;
  Estimate total;

 private:
  RecordCollector* previous_;
};

}  // namespace torchtpu::sim
