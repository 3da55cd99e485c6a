#include "runtime/Device.h"

#include "runtime/ChipSpec.h"
#include "runtime/Env.h"
#include "runtime/Log.h"

namespace torchtpu::runtime {
namespace {
thread_local c10::DeviceIndex tls_current_device = 0;
constexpr int64_t kDefaultDevices = 4;
constexpr int64_t kMaxDevices = 64;
}  // namespace

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = []() -> c10::DeviceIndex {
    try {
      int64_t n = env::get_int("TORCHTPU_NUM_DEVICES").value_or(kDefaultDevices);
      if (n < 0 || n > kMaxDevices) {
        log::warn("TORCHTPU_NUM_DEVICES=" + std::to_string(n) + " is outside [0, " +
                  std::to_string(kMaxDevices) + "]; no TPU devices are available");
        return 0;
      }
      return static_cast<c10::DeviceIndex>(n);
    } catch (const std::exception& e) {
      log::warn(std::string(e.what()) + "; no TPU devices are available");
      return 0;
    }
  }();
  return count;
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "Invalid device index tpu:", int(index),
              ": this process has ", int(device_count()), " simulated TPU device(s)",
              device_count() > 0 ? " (tpu:0 to tpu:" + std::to_string(device_count() - 1) + ")"
                                 : std::string(),
              ". Set TORCHTPU_NUM_DEVICES before the first use of torchtpu to change the count.");
}

c10::DeviceIndex current_device() { return tls_current_device; }

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_current_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  auto previous = tls_current_device;
  if (index != previous) set_device(index);
  return previous;
}

int64_t hbm_capacity_bytes() {
  static const int64_t bytes = [] {
    auto override_bytes = env::get_int("TORCHTPU_HBM_BYTES");
    if (override_bytes) {
      TORCH_CHECK(*override_bytes > 0, "TORCHTPU_HBM_BYTES must be positive");
      return *override_bytes;
    }
    return current_chip().hbm_bytes;
  }();
  return bytes;
}

}  // namespace torchtpu::runtime
