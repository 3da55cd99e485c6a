#include "runtime/Metrics.h"

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace torchtpu::runtime::metrics {
namespace {

struct Registry {
  std::mutex mutex;
  std::array<std::unordered_map<std::string, std::unique_ptr<std::atomic<int64_t>>>, 4> tables;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked on purpose: used from static destructors and threads
  return *r;
}

}  // namespace

std::atomic<int64_t>& slot(Category category, const std::string& name) {
  // Each thread keeps the slots it found (they live for the process): a counter named on a hot
  // path (an op's estimated time, a stream's host time per op) is one hash lookup, no lock.
  thread_local std::array<std::unordered_map<std::string, std::atomic<int64_t>*>, 4> found;
  auto& mine = found[static_cast<size_t>(category)];
  if (auto it = mine.find(name); it != mine.end()) return *it->second;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& entry = r.tables[static_cast<size_t>(category)][name];
  if (!entry) entry = std::make_unique<std::atomic<int64_t>>(0);
  mine.emplace(name, entry.get());
  return *entry;
}

std::atomic<int64_t>& slot_of_lasting(Category category, const std::string& name) {
  thread_local std::array<std::unordered_map<const std::string*, std::atomic<int64_t>*>, 4> found;
  auto& mine = found[static_cast<size_t>(category)];
  if (auto it = mine.find(&name); it != mine.end()) return *it->second;
  std::atomic<int64_t>& s = slot(category, name);
  mine.emplace(&name, &s);
  return s;
}

namespace {
thread_local int64_t* t_host_time_inner = nullptr;  // the innermost open HostTime's inner_ns_

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

HostTime::HostTime(const std::string& name, bool lasting)
    : name_(&name), lasting_(lasting), start_ns_(now_ns()), outer_inner_(t_host_time_inner) {
  t_host_time_inner = &inner_ns_;
}

HostTime::~HostTime() {
  const int64_t elapsed = now_ns() - start_ns_;
  t_host_time_inner = outer_inner_;
  if (outer_inner_ != nullptr) *outer_inner_ += elapsed;
  if (lasting_) {
    add_lasting(Category::host_time, *name_, elapsed - inner_ns_);
  } else {
    add(Category::host_time, *name_, elapsed - inner_ns_);
  }
}

std::map<std::string, int64_t> snapshot(Category category) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::map<std::string, int64_t> out;
  for (const auto& [name, value] : r.tables[static_cast<size_t>(category)]) {
    const int64_t v = value->load(std::memory_order_relaxed);
    if (v != 0) out.emplace(name, v);
  }
  return out;
}

void reset() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& table : r.tables) {
    for (auto& [name, value] : table) value->store(0, std::memory_order_relaxed);
  }
}

}  // namespace torchtpu::runtime::metrics
