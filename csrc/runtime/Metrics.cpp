#include "runtime/Metrics.h"

#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace torchtpu::runtime::metrics {
namespace {

struct Registry {
  std::mutex mutex;
  std::array<std::unordered_map<std::string, std::unique_ptr<std::atomic<int64_t>>>, 5> tables;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked on purpose: used from static destructors and threads
  return *r;
}

}  // namespace

std::atomic<int64_t>& slot(Category category, const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& entry = r.tables[static_cast<size_t>(category)][name];
  if (!entry) entry = std::make_unique<std::atomic<int64_t>>(0);
  return *entry;
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
