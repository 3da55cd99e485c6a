#pragma once
// Process-wide counters behind torchtpu.metrics. Nothing silent: every op run on the device,
// every CPU fallback and every notable runtime event is counted here, by name.
//
// Each counter is an atomic slot that lives for the process. Finding a slot by name takes a lock
// once; code on a hot path keeps a Counter (the slot's handle) and adds to it without a lock.
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace torchtpu::runtime::metrics {

enum class Category {
  op,        // ops executed by a native torchtpu kernel, by schema name ("aten::add.out")
  fallback,  // ops executed through the CPU fallback, by schema name
  counter,   // everything else: "transfer.host_to_device_bytes", "allocator.oom", ...
  host_time, // measured host time (nanoseconds) of the device's work, by name (HostTime)
};

// The slot of one counter (created at zero on first use).
std::atomic<int64_t>& slot(Category category, const std::string& name);

class Counter {
 public:
  Counter(Category category, const std::string& name) : slot_(&slot(category, name)) {}
  explicit Counter(const std::string& name) : Counter(Category::counter, name) {}
  void add(int64_t delta = 1) const { slot_->fetch_add(delta, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t>* slot_;
};

inline void add(Category category, const std::string& name, int64_t delta = 1) {
  slot(category, name).fetch_add(delta, std::memory_order_relaxed);
}
// The same for a name whose string lives for the process at one address and never changes (an
// op's name kept by its kernel): found by the address after the first use, no hashing of the text.
std::atomic<int64_t>& slot_of_lasting(Category category, const std::string& name);
inline void add_lasting(Category category, const std::string& name, int64_t delta = 1) {
  slot_of_lasting(category, name).fetch_add(delta, std::memory_order_relaxed);
}

// Measures the host time of one piece of device work into host_time under `name`: a stream's
// queued item, and work run on the issuing thread outside the queue (debug eager, ops that return
// new tensors, the fused attention, convolutions). Scopes nest on a thread, and each adds its own
// time only (a profiler's "self" time): work timed inside other timed work (a GEMM inside a fused
// region, queued items a wait runs) is counted under its own name and taken out of the outer
// scope's, so every nanosecond is counted once. `lasting`: `name` lives for the process at one
// address (add_lasting).
class HostTime {
 public:
  explicit HostTime(const std::string& name, bool lasting = false);
  ~HostTime();
  HostTime(const HostTime&) = delete;
  HostTime& operator=(const HostTime&) = delete;

 private:
  const std::string* name_;
  bool lasting_;
  int64_t start_ns_;
  int64_t inner_ns_ = 0;  // time of the scopes nested in this one
  int64_t* outer_inner_;  // the enclosing scope's inner_ns_ (null if none)
};

inline void count_fallback(const std::string& name) { add(Category::fallback, name); }
inline void count(const std::string& name, int64_t delta = 1) { add(Category::counter, name, delta); }

// Adds to the counter whose name is the string literal `name`, through a handle found on first use
// (no lock after that): TORCHTPU_COUNT("defer.graphs"); TORCHTPU_COUNT("defer.regions", n);
#define TORCHTPU_COUNT(name, ...)                                                        \
  do {                                                                                   \
    static const ::torchtpu::runtime::metrics::Counter torchtpu_counter_(name);          \
    torchtpu_counter_.add(__VA_ARGS__);                                                  \
  } while (0)

// The counters of a category that are not zero.
std::map<std::string, int64_t> snapshot(Category category);
// Sets every counter to zero (their slots stay valid).
void reset();

}  // namespace torchtpu::runtime::metrics
