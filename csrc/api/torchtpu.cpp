// The public C++ API (include/torchtpu/torchtpu.h) over the runtime.
#include <torchtpu/torchtpu.h>

#include "runtime/Mode.h"
#include "runtime/Allocator.h"
#include "runtime/ChipSpec.h"
#include "runtime/Device.h"
#include "runtime/Metrics.h"
#include "runtime/Stream.h"
#include "sim/Ledger.h"

#include <c10/core/DeviceType.h>

#include <cstdlib>

namespace torchtpu {
namespace {

using c10::CachingAllocator::StatType;

// The device is called "tpu" from the moment the library is loaded, for C++ programs and Python
// alike (Python's rename_privateuse1_backend("tpu") then finds the same name already set).
const bool named = [] {
  c10::register_privateuse1_backend("tpu");
  return true;
}();

c10::CachingAllocator::Stat aggregate(const c10::CachingAllocator::StatArray& array) {
  return array[static_cast<size_t>(StatType::AGGREGATE)];
}

}  // namespace

int init() {
  // Queued device work (strict eager) is finished before static destruction at exit.
  static const bool registered = [] {
    std::atexit([] {
      for (int i = 0; i < runtime::device_count(); ++i) {
        try {
          runtime::synchronize_device(static_cast<c10::DeviceIndex>(i));
        } catch (const std::exception&) {
        }
      }
    });
    return true;
  }();
  (void)registered;
  return device_count();
}

int device_count() { return runtime::device_count(); }

int64_t physical_chip(int device) {
  return runtime::physical_chip(static_cast<c10::DeviceIndex>(device));
}

std::string chip_name() { return runtime::current_chip().name; }

int64_t hbm_capacity_bytes() { return runtime::hbm_capacity_bytes(); }


Chip chip() { return runtime::current_chip(); }

std::vector<Chip> all_chips() { return runtime::all_chips(); }

void synchronize(int device) {
  runtime::synchronize_device(device < 0 ? runtime::current_device()
                                         : static_cast<c10::DeviceIndex>(device));
}

void set_eager_mode(const std::string& mode) {
  runtime::set_eager_mode(runtime::eager_mode_from_name(mode));
}

std::string eager_mode() { return runtime::name(runtime::eager_mode()); }

std::map<std::string, int64_t> native_op_counts() {
  return runtime::metrics::snapshot(runtime::metrics::Category::op);
}
std::map<std::string, int64_t> fallback_counts() {
  return runtime::metrics::snapshot(runtime::metrics::Category::fallback);
}
std::map<std::string, int64_t> counters() {
  return runtime::metrics::snapshot(runtime::metrics::Category::counter);
}
void reset_metrics() {
  runtime::metrics::reset();
  sim::ledger_reset();
}

int64_t memory_allocated(int device) {
  return aggregate(runtime::allocator().getDeviceStats(device).allocated_bytes).current;
}
int64_t memory_reserved(int device) {
  return aggregate(runtime::allocator().getDeviceStats(device).reserved_bytes).current;
}
int64_t max_memory_allocated(int device) {
  return aggregate(runtime::allocator().getDeviceStats(device).allocated_bytes).peak;
}

}  // namespace torchtpu
