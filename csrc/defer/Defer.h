#pragma once
// DeferAndFuse: fused eager mode (docs/design.md 3.1, docs/eager-modes.md).
//
// In fused eager, ops on TPU tensors are recorded instead of run. Their results are TPU tensors
// with real metadata (sizes, strides, dtype) whose storage is *pending*: it has no memory
// until the region that writes it runs, and an intermediate that dies before then never takes
// any HBM. At a materialization point (a host read, an op that cannot be recorded, a
// synchronization, the graph size limit, a mode switch) the pending graph is cut into regions,
// planned (the plan is cached by the graph's fingerprint) and enqueued on the device's stream:
// chains of element-wise ops become one fused region run block by block; everything else runs
// through its ordinary kernel.
#include "runtime/DeferredWork.h"

#include <c10/core/Storage.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>
#include <map>
#include <string>

namespace torchtpu::defer {

// The pending graph registers itself as the runtime's DeferredWork (runtime/DeferredWork.h):
// Runs every recorded op (enqueued on the streams, like strict eager); counts `reason`.
void flush(runtime::FlushReason reason);
// flush(), then gives memory to every pending storage still referenced, so that nothing is
// pending any more (torchtpu.sync(), mode switches, memory statistics).
void materialize_all(runtime::FlushReason reason);

// Number of ops recorded and not yet run.
int64_t pending_ops();
// Whether `storage` is pending: recorded work will write it and it has no memory yet.
bool is_pending(const c10::Storage& storage);

// Python location of the calling code ("file.py:12"), installed by the Python module; used for
// materialization points and, when record_locations is on, for every recorded op.
using LocationProvider = std::string (*)();
void set_location_provider(LocationProvider provider);
void set_record_locations(bool on);  // TORCHTPU_DEFER_LOCATIONS=1
bool record_locations();

// Appends the IR of every newly planned region to `path` (empty: off). TORCHTPU_DUMP_REGIONS.
void set_dump_path(const std::string& path);
// The IR of the plans in the cache, as text.
std::string cached_plans_text();
// Drops the plan cache.
void clear_cache();
// The plan cache's entries, most recently used first: how often each plan was read (its planning
// counts as one read), how long planning took, when it was last read.
struct PlanCacheEntry {
  int64_t reads = 0;
  int64_t planning_ns = 0;
  std::chrono::system_clock::time_point last_read;
};
std::vector<PlanCacheEntry> plan_cache_entries();
// The plan cache's policy (unset arguments keep theirs): use the cache at all; refuse to plan a
// graph that is not cached (an error instead); print the IR of every new plan.
void set_plan_cache_policy(std::optional<bool> allow, std::optional<bool> only,
                           std::optional<bool> dump_on_miss);
bool plan_cache_dumps_on_miss();

// Maximum number of recorded ops before a flush (TORCHTPU_DEFER_MAX_OPS, default 4096).
void set_max_pending_ops(int64_t n);

// Loop detection (RepeatedOps.cpp; TorchTPU's TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS): off, or
// the pending graph is flushed where the op stream repeats a sequence of 11 to 128 ops. Setting
// it clears the window of recorded signatures.
enum class RepeatedOps : uint8_t { off, safe, aggressive };
void set_repeated_ops(RepeatedOps mode);
RepeatedOps repeated_ops();

// Materialization points: reason -> location -> count.
std::map<std::string, std::map<std::string, int64_t>> materializations();
void reset_materializations();

}  // namespace torchtpu::defer
