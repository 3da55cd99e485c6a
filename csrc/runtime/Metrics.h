#pragma once
// Process-wide counters behind torchtpu.metrics. Nothing silent: every op run on the device,
// every CPU fallback and every notable runtime event is counted here, by name.
#include <cstdint>
#include <map>
#include <string>

namespace torchtpu::runtime::metrics {

enum class Category {
  op,        // ops executed by a native torchtpu kernel, by aten name
  fallback,  // ops executed through the CPU fallback, by aten name
  counter,   // everything else: "transfer.host_to_device_bytes", "allocator.oom", ...
  op_time,   // estimated device time (picoseconds) of the launches of each op, by aten name
  host_time, // measured host time (nanoseconds) of the work run on stream workers, by name
};

void add(Category category, const std::string& name, int64_t delta = 1);
inline void count_op(const std::string& name) { add(Category::op, name); }
inline void count_fallback(const std::string& name) { add(Category::fallback, name); }
inline void count(const std::string& name, int64_t delta = 1) { add(Category::counter, name, delta); }

std::map<std::string, int64_t> snapshot(Category category);
void reset();

}  // namespace torchtpu::runtime::metrics
