// The DeviceGuardImplInterface for PrivateUse1: current device, streams and events.
// torch.accelerator, torch.Stream, torch.Event and c10::DeviceGuard all reach the device here.
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchtpu::runtime {
namespace {

void check_tpu(c10::Device d) {
  TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "Expected a TPU device, got ", d);
}

// "tpu" without an index means the current device, as "cuda" does.
c10::DeviceIndex index_of(c10::Device d) { return d.has_index() ? d.index() : current_device(); }

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return static_type; }

  c10::Device exchangeDevice(c10::Device d) const override {
    check_tpu(d);
    return tpu_device(exchange_device(index_of(d)));
  }
  c10::Device getDevice() const override { return tpu_device(current_device()); }
  void setDevice(c10::Device d) const override {
    check_tpu(d);
    set_device(index_of(d));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_device(index_of(d));
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override { return current_stream(index_of(d)); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(index_of(d)); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return pool_stream(index_of(d));
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(index_of(d), priority);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    // Every dtype works on the device: the ones without native kernels through the counted CPU
    // fallback (see docs/runtime.md).
    return c10::DeviceCapability();
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", int(device_index), " does not match the stream's device ",
                stream.device());
    event::record(event, stream, flag);
  }
  void block(void* event, const c10::Stream& stream) const override {
    event::block(event, stream);
  }
  bool queryEvent(void* event) const override { return event::query(event); }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    event::destroy(event);
  }
  void synchronizeEvent(void* event) const override { event::synchronize(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    return event::elapsed_ms(start, end);
  }

  bool queryStream(const c10::Stream& stream) const override { return queue_of(stream).query(); }
  void synchronizeStream(const c10::Stream& stream) const override {
    queue_of(stream).synchronize();
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize_device(device_index < 0 ? current_device() : device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    allocator().recordStream(data, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace
}  // namespace torchtpu::runtime
