#pragma once
// The ledger of launches (docs/insight.md): every launch charged since the last reset, kept as
// chip-independent work (sim::Work) per op with a count, so a run can be priced for any chip
// afterwards without running again (torchtpu.metrics.estimate(chip="v6e")). Pricing the ledger
// for the simulated chip gives what that chip's cost model charged.
//
// Each thread adds to a table of its own (no lock shared with other threads on the hot path);
// a reader merges the tables. A table that grows past a bound (a run with ever-new shapes) is
// priced for every known chip and folded into per-chip totals, so memory stays bounded and
// re-pricing for a known chip stays exact.
//
// While a device trace is on (the profiler), each launch is also appended to the trace with
// its device, stream, host time of issue, the correlation id of the CPU op issuing it, and its
// estimated duration on the simulated chip.
#include "sim/CostModel.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

namespace torchtpu::sim {

// Called by record(): one launch of `op`.
void ledger_add(const std::string& op, const Estimate& estimate);

// Additive totals of a priced ledger. Launch costs are kept apart from the busy time (the
// max of the MXU / VPU / HBM terms of each launch) so that a launch cost can be chosen when
// reading: seconds = busy_s + launches x launch cost.
struct Priced {
  double busy_s = 0, mxu_s = 0, vpu_s = 0, hbm_s = 0, ici_s = 0;
  double flops = 0, mxu_flops = 0, hbm_bytes = 0;
  double peak_s = 0;  // the matmuls at the peak of their dtypes (Estimate::peak_s)
  int64_t launches = 0;
  int64_t bound_mxu = 0, bound_vpu = 0, bound_hbm = 0, bound_ici = 0;  // launches bounded by each
  int64_t priced_as_native = 0;  // launches of fallback ops, priced as if native
  void add(const Estimate& e, int64_t count);
  Priced& operator+=(const Priced& o);
};

struct LedgerTotals {
  Priced all;
  std::map<std::string, Priced> per_op;
  std::map<int, Priced> per_device;  // the devices run in parallel
  // Ops run through a host fallback, priced as if native: name -> launches.
  std::map<std::string, int64_t> priced_as_native;
};

// The ledger priced for `chip` (its busy time; add launches x launch cost for seconds).
LedgerTotals ledger_totals(const runtime::ChipSpec& chip);
// Empties the ledger (torchtpu.metrics.reset()).
void ledger_reset();

// ---- Overlap of communication with compute.
//
// A collective runs on the chip's ICI (its DMA engines and links) beside the TensorCore. From
// the first collective on, the ledger also keeps clocks per device, for every known chip: when
// the TensorCore and the ICI are free, and when each stream's last launch ends. A launch starts
// when both its stream and its engine are free; a collective occupies the ICI and its stream; a
// stream waiting for an event (wait_event, wait_stream) waits for the time the event was
// recorded at, and Work.wait() makes the current stream wait for the collective
// (collective_waited). So a collective issued on a stream of its own (FSDP2's, or a user's)
// overlaps the compute on the others, and one on the compute's stream does not. Hidden ICI
// time per device = the sum of every duration - the span of the clocks.

// Charges nothing; advances the clocks for a charged collective on the current stream and
// returns its id.
uint64_t collective_issued(const Estimate& e);
void collective_waited(uint64_t id);
// ICI seconds hidden behind compute, per device, for `chip` (at its configured launch cost).
std::map<int, double> hidden_ici_seconds(const runtime::ChipSpec& chip);

// ---- The device trace (torch.profiler's device timeline).

struct TraceEvent {
  std::string name;            // the op, or "defer::fused_region", "compiled::<program>"
  int device = 0;
  int64_t stream = 0;
  int64_t issued_ns = 0;       // host time of issue (c10::getTime(), the profiler's clock)
  int32_t thread = 0;          // the issuing thread (system id)
  double seconds = 0;          // estimated duration on the simulated chip
  uint64_t correlation = 0;    // the CPU op that issued it (0: none)
  const char* bound = "";      // "mxu", "vpu" or "hbm"
  double flops = 0, hbm_bytes = 0;
  int64_t launches = 1;
  bool priced_as_native = false;
  // The measured host time (ns) of the launch's work on this machine, filled in when it has
  // run (-1 until then, or when the work ran inline).
  std::shared_ptr<std::atomic<int64_t>> host_ns;
};

// The host-time slot of the last launch traced on this thread, if it was charged as `name`
// (aten::launch fills it when the work runs); null otherwise. Taking it clears it.
std::shared_ptr<std::atomic<int64_t>> take_host_time_slot(const std::string& name);

// Starts or stops appending launches to the trace (stopping keeps what was traced).
void set_tracing(bool on);
bool tracing();
// Takes the events traced so far.
std::vector<TraceEvent> take_trace();
// The correlation id of the CPU op running on this thread (set by the profiler session).
void push_correlation(uint64_t id);
void pop_correlation();

}  // namespace torchtpu::sim
