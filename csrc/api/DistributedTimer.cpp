// DDP's timer for tpu devices (docs/distributed.md). DDP's logging (average forward, backward
// compute and communication times, `_get_ddp_logging_data()`) asks c10d's TimerRegistry for a
// timer of the parameters' device type; without one it warns that time stats are collected for
// CPU and CUDA only and reports none. This one does what CUDA's does with CUDA events: an event
// on the device's current stream per mark, timed when the stream's worker reaches it.
#include "runtime/Stream.h"

#include "pytorch/Internals.h"

#include <array>

namespace torchtpu::api {
namespace {

class TpuTimer final : public c10d::Timer {
 public:
  explicit TpuTimer(c10::Device device) : device_(device) {}
  ~TpuTimer() override {
    for (void* e : events_) runtime::event::destroy(e);
  }
  TpuTimer(const TpuTimer&) = delete;
  TpuTimer& operator=(const TpuTimer&) = delete;

  void record(Event event) override {
    c10d::Timer::record(event);  // the host's timestamp, as every timer keeps
    runtime::event::record(&events_[static_cast<size_t>(event)],
                           runtime::current_stream(device_.index()),
                           c10::EventFlag::BACKEND_DEFAULT);
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    void* a = events_[static_cast<size_t>(start)];
    void* b = events_[static_cast<size_t>(end)];
    if (a == nullptr || b == nullptr) return std::nullopt;
    runtime::event::synchronize(a);
    runtime::event::synchronize(b);
    return static_cast<int64_t>(runtime::event::elapsed_ms(a, b) * 1e6);
  }

 private:
  c10::Device device_;
  std::array<void*, 5> events_{};  // one per Timer::Event
};

}  // namespace
}  // namespace torchtpu::api

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torchtpu::api::TpuTimer)
}  // namespace c10d
