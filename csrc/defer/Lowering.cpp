// Lowering of the pending graph: the plan cache, and run_graph, which plans a graph (or finds its
// cached plan) and executes it (Plan.h, docs/design.md 3.1). Compiled programs are planned through
// the same cache (Programs.cpp).
#include "defer/Defer.h"
#include "defer/Graph.h"
#include "defer/Plan.h"
#include "defer/Program.h"
#include "runtime/Env.h"
#include "runtime/Metrics.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"

#include "pytorch/Internals.h"
#include <c10/util/hash.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <fstream>
#include <tuple>
#include <list>
#include <mutex>
#include <unordered_map>

namespace torchtpu::defer {
namespace {


// The plan cache: keyed by a 128-bit hash of the graph's structure (Plan.h: everything a plan
// depends on) with the record-time fingerprint of the non-tensor arguments mixed in; a hit is
// checked against the stored structure (a collision is a miss, counted), and the least recently
// used plan goes when the cache is full (TORCHTPU_DEFER_PLAN_CACHE plans, default 4096).

struct PlanKey {
  uint64_t lo = 0, hi = 0;
  bool operator==(const PlanKey& o) const { return lo == o.lo && hi == o.hi; }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi >> 1)); }
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// (Two cheap lanes, each finalized once: a collision only costs a miss, since a hit is checked
// against the stored structure.)
PlanKey hash_structure(const std::vector<int64_t>& structure) {
  uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
  for (int64_t v : structure) {
    a = (a ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
    b = (b + static_cast<uint64_t>(v)) * 0x9e3779b97f4a7c15ULL;
    b ^= b >> 29;
  }
  return PlanKey{mix(a), mix(b ^ structure.size())};
}

// What a plan depends on, as integers: per node its op, capture, place, fusion facts and shape,
// per operand and result its storage key, geometry, dtype and access; liveness of every pending
// storage; the record-time fingerprint of the arguments.
// Written into `out` (cleared; its capacity kept from one graph to the next).
void structure_of(const std::vector<Node>& nodes, const Keys& keys,
                  const std::vector<char>& alive_keys, uint64_t fingerprint,
                  std::vector<int64_t>& out) {
  out.clear();
  out.reserve(nodes.size() * 24 + alive_keys.size() + 2);
  out.push_back(static_cast<int64_t>(fingerprint));
  auto operand = [&](const Operand& o, int key) {
    out.push_back(key);
    if (!o.defined()) return;
    out.push_back(static_cast<int64_t>(o.dtype) | (int64_t(o.read) << 8) |
                  (int64_t(o.written) << 9) | (int64_t(o.conj) << 10) | (int64_t(o.neg) << 11));
    out.push_back(o.offset);
    out.push_back(static_cast<int64_t>(o.sizes.size()));
    out.insert(out.end(), o.sizes.begin(), o.sizes.end());
    out.insert(out.end(), o.strides.begin(), o.strides.end());
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    out.push_back(reinterpret_cast<int64_t>(&n.op.schema()));
    out.push_back(static_cast<int64_t>(n.capture) | (int64_t(n.elementwise) << 8) |
                  (int64_t(n.checks_values) << 9));
    out.push_back(place_of(n));
    out.push_back(static_cast<int64_t>(n.shape.size()));
    out.insert(out.end(), n.shape.begin(), n.shape.end());
    out.push_back(static_cast<int64_t>(n.operands.size()));
    for (size_t j = 0; j < n.operands.size(); ++j) operand(n.operands[j], keys.operands[i][j]);
    out.push_back(static_cast<int64_t>(n.results.size()));
    for (size_t j = 0; j < n.results.size(); ++j) operand(n.results[j], keys.results[i][j]);
  }
  for (char a : alive_keys) out.push_back(a);
}

struct Cache {
  struct Entry {
    PlanKey key;
    std::vector<int64_t> structure;
    std::shared_ptr<Plan> plan;
    PlanCacheEntry stats;  // (reads count the planning, as TorchTPU counts a compilation)
  };
  // torch.tpu._set_allow_cache(False): every graph is planned anew and nothing is kept;
  // _set_cache_only(True): a graph whose plan is not cached raises instead of being planned;
  // _set_dump_on_cache_miss(True): the IR of each new plan goes to standard error.
  bool allow = true;
  bool only = false;
  bool dump_on_miss = false;
  std::mutex mutex;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index;
  size_t capacity = static_cast<size_t>(
      std::max<int64_t>(1, runtime::env::int_value("TORCHTPU_DEFER_PLAN_CACHE")));
  std::string dump_path = [] {
    return runtime::env::value("TORCHTPU_DUMP_REGIONS");
  }();

  // The plan of `structure`, or null. Caller holds the mutex.
  std::shared_ptr<Plan> find(const PlanKey& key, const std::vector<int64_t>& structure) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    if (it->second->structure != structure) {
      TORCHTPU_COUNT("defer.cache_collisions");
      return nullptr;
    }
    lru.splice(lru.begin(), lru, it->second);
    it->second->stats.reads += 1;
    it->second->stats.last_read = std::chrono::system_clock::now();
    return it->second->plan;
  }
  void insert(const PlanKey& key, std::vector<int64_t> structure, std::shared_ptr<Plan> plan,
              int64_t planning_ns) {
    if (auto it = index.find(key); it != index.end()) {
      lru.erase(it->second);
      index.erase(it);
    }
    while (lru.size() >= capacity) {
      index.erase(lru.back().key);
      lru.pop_back();
      TORCHTPU_COUNT("defer.cache_evictions");
    }
    lru.push_front(Entry{key, std::move(structure), std::move(plan),
                         PlanCacheEntry{1, planning_ns, std::chrono::system_clock::now()}});
    index[key] = lru.begin();
  }
};

Cache& cache() {
  static auto* c = new Cache();
  return *c;
}

}  // namespace

std::shared_ptr<Plan> plan_of(const std::vector<Node>& nodes, const Keys& keys,
                              const std::vector<char>& alive_keys, uint64_t fingerprint,
                              const char* planned_for, const PlanOptions& options) {
  thread_local std::vector<int64_t> structure;  // (the common case, a hit, allocates nothing)
  structure_of(nodes, keys, alive_keys, fingerprint, structure);
  structure.push_back(options.pin_allocations);  // (a program's plan is not an eager graph's)
  const PlanKey key = hash_structure(structure);
  std::shared_ptr<Plan> plan;
  Cache& c = cache();
  bool allow = true;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    allow = c.allow;
    if (allow) plan = c.find(key, structure);
    TORCH_CHECK(plan != nullptr || !c.only,
                "torch.tpu._set_cache_only(True) is in force and the plan of this graph (",
                planned_for, ", ", nodes.size(),
                " recorded ops) is not in the cache: run the program once without cache-only "
                "to plan it, or call torch.tpu._set_cache_only(False)");
  }
  if (plan) {
    TORCHTPU_COUNT("defer.cache_hits");
  } else {
    TORCHTPU_COUNT("defer.cache_misses");
    std::vector<int64_t> kept = structure;  // (the thread's buffer is not held across planning)
    const auto t0 = std::chrono::steady_clock::now();
    plan = build_plan(nodes, keys, alive_keys, options);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    TORCHTPU_COUNT("defer.compiles");
    if (plan->replans) TORCHTPU_COUNT("defer.replans", plan->replans);
    TORCHTPU_COUNT("defer.compile_ns", ns);
    std::lock_guard<std::mutex> lock(c.mutex);
    if (allow) c.insert(key, std::move(kept), plan, ns);
    if (c.dump_on_miss) std::cerr << "# plan cache miss: " << planned_for << "\n" << plan->ir << "\n";
    if (!c.dump_path.empty()) {
      std::ofstream out(c.dump_path, std::ios::app);
      out << "# " << planned_for << "\n" << plan->ir << "\n";
    }
  }
  return plan;
}

std::vector<char> alive_keys_of(const Keys& keys) {
  std::vector<char> alive_keys(keys.pending.size());
  for (size_t k = 0; k < keys.pending.size(); ++k) alive_keys[k] = alive(*keys.pending[k]);
  return alive_keys;
}

namespace {

void count_graph(const Plan& plan) {
  TORCHTPU_COUNT("defer.graphs");
  TORCHTPU_COUNT("defer.regions", static_cast<int64_t>(plan.regions.size()));
  int64_t eliminated = 0;
  for (char l : plan.live) eliminated += !l;
  if (eliminated) TORCHTPU_COUNT("defer.ops_eliminated", eliminated);
}

}  // namespace

void run_graph(std::vector<Node> nodes, uint64_t fingerprint, runtime::FlushReason reason) {
  const auto start = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point start;
    ~Timer() {
      TORCHTPU_COUNT("defer.flush_host_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
    }
  } timer{start};
  const Keys keys = keys_of(nodes);
  const std::vector<char> alive_keys = alive_keys_of(keys);
  const std::string why = std::string("flushed by: ") + runtime::policy(reason).label;
  std::shared_ptr<Plan> plan = plan_of(nodes, keys, alive_keys, fingerprint, why.c_str(),
                                       PlanOptions::from_environment());
  count_graph(*plan);
  const bool blocking = runtime::policy(reason).host_waits;
  execute(nodes, keys, *plan, alive_keys, blocking);
}

void set_dump_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().dump_path = path;
}

std::string cached_plans_text() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  std::string out;
  for (const auto& entry : cache().lru) out += entry.plan->ir + "\n";
  return out;
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().lru.clear();
  cache().index.clear();
}

std::vector<PlanCacheEntry> plan_cache_entries() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  std::vector<PlanCacheEntry> out;
  for (const auto& entry : cache().lru) out.push_back(entry.stats);
  return out;
}

void set_plan_cache_policy(std::optional<bool> allow, std::optional<bool> only,
                           std::optional<bool> dump_on_miss) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (allow) cache().allow = *allow;
  if (only) cache().only = *only;
  if (dump_on_miss) cache().dump_on_miss = *dump_on_miss;
}

bool plan_cache_dumps_on_miss() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().dump_on_miss;
}

}  // namespace torchtpu::defer
