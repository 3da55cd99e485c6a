// Lowering of the pending graph: the plan cache, and run_graph, which plans a graph (or finds its
// cached plan) and executes it (Plan.h, docs/design.md 3.1).
#include "defer/Defer.h"
#include "defer/Graph.h"
#include "defer/Plan.h"
#include "runtime/Metrics.h"

#include <c10/util/hash.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <unordered_map>

namespace torchtpu::defer {
namespace {

using runtime::metrics::count;

// The plan cache

struct Cache {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<Plan>> plans;
  std::string dump_path = [] {
    const char* v = std::getenv("TORCHTPU_DUMP_REGIONS");
    return v == nullptr ? std::string() : std::string(v);
  }();
};

Cache& cache() {
  static auto* c = new Cache();
  return *c;
}

}  // namespace

void run_graph(std::vector<Node> nodes, uint64_t fingerprint, runtime::FlushReason reason) {
  const auto start = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point start;
    ~Timer() {
      count("defer.flush_host_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
    }
  } timer{start};
  const Keys keys = keys_of(nodes);
  std::vector<char> alive_keys(keys.pending.size());
  size_t h = c10::hash_combine(fingerprint, nodes.size());
  for (size_t k = 0; k < keys.pending.size(); ++k) {
    alive_keys[k] = alive(*keys.pending[k]);
    h = c10::hash_combine(h, alive_keys[k] ? 0x51 : 0x33);
  }
  std::shared_ptr<Plan> plan;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.plans.find(h);
    if (it != c.plans.end()) plan = it->second;
  }
  if (plan) {
    count("defer.cache_hits");
  } else {
    count("defer.cache_misses");
    const auto t0 = std::chrono::steady_clock::now();
    plan = build_plan(nodes, keys, alive_keys);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    count("defer.compiles");
    if (plan->replans) count("defer.replans", plan->replans);
    count("defer.compile_ns", ns);
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.plans.size() > 4096) c.plans.clear();
    c.plans.emplace(h, plan);
    if (!c.dump_path.empty()) {
      std::ofstream out(c.dump_path, std::ios::app);
      out << "# flushed by: " << runtime::policy(reason).label << "\n" << plan->ir << "\n";
    }
  }
  count("defer.graphs");
  count("defer.regions", static_cast<int64_t>(plan->regions.size()));
  int64_t eliminated = 0;
  for (char l : plan->live) eliminated += !l;
  if (eliminated) count("defer.ops_eliminated", eliminated);
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
  for (const auto& [key, plan] : cache().plans) out += plan->ir + "\n";
  return out;
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().plans.clear();
}

}  // namespace torchtpu::defer