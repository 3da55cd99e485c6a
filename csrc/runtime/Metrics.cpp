#include "runtime/Metrics.h"

#include <array>
#include <mutex>
#include <unordered_map>

namespace torchtpu::runtime::metrics {
namespace {

struct Registry {
  std::mutex mutex;
  std::array<std::unordered_map<std::string, int64_t>, 5> tables;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked on purpose: used from static destructors and threads
  return *r;
}

}  // namespace

void add(Category category, const std::string& name, int64_t delta) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.tables[static_cast<size_t>(category)][name] += delta;
}

std::map<std::string, int64_t> snapshot(Category category) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto& table = r.tables[static_cast<size_t>(category)];
  return std::map<std::string, int64_t>(table.begin(), table.end());
}

void reset() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& table : r.tables) table.clear();
}

}  // namespace torchtpu::runtime::metrics
