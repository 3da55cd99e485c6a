#include "runtime/Device.h"

#include "runtime/ChipSpec.h"
#include "runtime/Env.h"
#include "runtime/Log.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace torchtpu::runtime {
namespace {
thread_local c10::DeviceIndex tls_current_device = 0;
constexpr int64_t kDefaultDevices = 4;
constexpr int64_t kMaxDevices = 64;
}  // namespace

namespace {

// The chips of the host this process sees, in device-index order.
const std::vector<int64_t>& visible_chips() noexcept {
  static const std::vector<int64_t> chips = []() -> std::vector<int64_t> {
    try {
      // TORCHTPU_NUM_DEVICES, else the count of ACCELERATOR_TYPE (TorchTPU's "v6e-4").
      std::optional<int64_t> asked = env::get_int("TORCHTPU_NUM_DEVICES");
      if (!asked) {
        if (auto type = accelerator_type()) asked = type->chips;
      }
      int64_t host = asked.value_or(kDefaultDevices);
      if (host < 0 || host > kMaxDevices) {
        log::warn("TORCHTPU_NUM_DEVICES=" + std::to_string(host) + " is outside [0, " +
                  std::to_string(kMaxDevices) + "]; no TPU devices are available");
        return {};
      }
      std::vector<int64_t> chips;
      // TPU_VISIBLE_DEVICES (TorchTPU's source of truth), else TPU_VISIBLE_CHIPS.
      const char* visible_name = "TPU_VISIBLE_DEVICES";
      auto visible = env::get("TPU_VISIBLE_DEVICES");
      if (!visible || visible->empty()) {
        visible_name = "TPU_VISIBLE_CHIPS";
        visible = env::get("TPU_VISIBLE_CHIPS");
      }
      if (!visible || visible->empty()) {
        for (int64_t i = 0; i < host; ++i) chips.push_back(i);
        return chips;
      }
      std::stringstream list(*visible);
      std::string item;
      while (std::getline(list, item, ',')) {
        size_t used = 0;
        int64_t chip = -1;
        try {
          chip = std::stoll(item, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        const bool known = used > 0 && used == item.size() && chip >= 0 && chip < host;
        if (!known || std::find(chips.begin(), chips.end(), chip) != chips.end()) {
          log::warn(std::string(visible_name) + "=" + *visible + ": '" + item + "' is " +
                    (known ? "listed twice" : "not a chip of this host (0 to " +
                                                  std::to_string(host - 1) + ")") +
                    "; no TPU devices are available");
          return {};
        }
        chips.push_back(chip);
      }
      return chips;
    } catch (const c10::Error& e) {
      log::warn(std::string(e.what_without_backtrace()) + "; no TPU devices are available");
      return {};
    } catch (const std::exception& e) {
      log::warn(std::string(e.what()) + "; no TPU devices are available");
      return {};
    }
  }();
  return chips;
}

}  // namespace

c10::DeviceIndex device_count() noexcept {
  return static_cast<c10::DeviceIndex>(visible_chips().size());
}

int64_t physical_chip(c10::DeviceIndex index) {
  check_device_index(index);
  return visible_chips()[index];
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "Invalid device index tpu:", int(index),
              ": this process has ", int(device_count()), " simulated TPU device(s)",
              device_count() > 0 ? " (tpu:0 to tpu:" + std::to_string(device_count() - 1) + ")"
                                 : std::string(),
              ". Set TORCHTPU_NUM_DEVICES (or TPU_VISIBLE_CHIPS) before the first use of torchtpu to "
              "change the count.");
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
