// Stream events (torch.tpu.Event): a recording is a mark (StreamMark.h) its stream's worker
// completes when it reaches it; waits, queries and elapsed times read the latest recording.
// StreamMark itself is implemented here too: the profiler's device events (api/Profiler.cpp)
// are the same marks.
#include "runtime/DeferredWork.h"
#include "runtime/HostWait.h"
#include "runtime/Stream.h"
#include "runtime/StreamMark.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

namespace torchtpu::runtime {

namespace {
std::atomic<EventObserver> g_event_observer{nullptr};

void observe(const void* event, const c10::Stream& stream, bool recorded) {
  if (EventObserver o = g_event_observer.load(std::memory_order_relaxed)) o(event, stream, recorded);
}
}  // namespace

void set_event_observer(EventObserver observer) { g_event_observer.store(observer); }

// ---------------------------------------------------------------------------------------------
// StreamMark (StreamMark.h)

void StreamMark::complete() {
  std::lock_guard<std::mutex> lock(mutex_);
  when_ = std::chrono::steady_clock::now();
  done_ = true;
  cv_.notify_all();
}

void StreamMark::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (on_stream_worker()) {
    cv_.wait(lock, [&] { return done_; });  // (an event wait enqueued on another stream)
  } else {
    wait_interruptibly(lock, cv_, [&] { return done_; });
  }
}

bool StreamMark::is_done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

std::chrono::steady_clock::time_point StreamMark::when() {
  std::lock_guard<std::mutex> lock(mutex_);
  return when_;
}

std::chrono::steady_clock::time_point StreamMark::reached() {
  wait();
  return when();
}

// ---------------------------------------------------------------------------------------------
// Events: each recording is a StreamMark

namespace event {
namespace {

struct Event {
  std::mutex mutex;
  std::shared_ptr<StreamMark> mark;  // the latest recording; null if never recorded
  bool timing = false;
  c10::DeviceIndex device = -1;

  std::shared_ptr<StreamMark> latest() {
    std::lock_guard<std::mutex> lock(mutex);
    return mark;
  }
};

}  // namespace

void record(void** handle, const c10::Stream& stream, c10::EventFlag flag) {
  flush_deferred_work(FlushReason::event_record);
  auto& queue = queue_of(stream);
  if (*handle == nullptr) {
    auto* e = new Event();
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    e->device = stream.device_index();
    *handle = e;
  }
  auto* e = static_cast<Event*>(*handle);
  TORCH_CHECK(e->device == stream.device_index(), "Event recorded on tpu:", int(e->device),
              " cannot be recorded on a stream of tpu:", int(stream.device_index()));
  auto mark = std::make_shared<StreamMark>();
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    e->mark = mark;
  }
  queue.enqueue([] {}, "event record", [mark] { mark->complete(); });
  observe(e, stream, /*recorded=*/true);
}

void block(void* handle, const c10::Stream& stream) {
  if (handle == nullptr) return;
  auto mark = static_cast<Event*>(handle)->latest();
  if (!mark) return;
  // (Always the worker's: run by the issuing thread on an idle stream, the wait would block the
  // host until the other stream reaches the mark, where CUDA's host goes on.)
  const WorkerOnly on_the_worker;
  queue_of(stream).enqueue([mark] { mark->wait(); }, "event wait");
  observe(handle, stream, /*recorded=*/false);
}

bool query(void* handle) {
  if (handle == nullptr) return true;
  auto mark = static_cast<Event*>(handle)->latest();
  return !mark || mark->is_done();
}

void synchronize(void* handle) {
  if (handle == nullptr) return;
  auto mark = static_cast<Event*>(handle)->latest();
  if (mark) mark->wait();
}

void destroy(void* handle) noexcept { delete static_cast<Event*>(handle); }

double elapsed_ms(void* start, void* end) {
  TORCH_CHECK(start != nullptr && end != nullptr,
              "Both events must be recorded before calculating elapsed time.");
  auto* a = static_cast<Event*>(start);
  auto* b = static_cast<Event*>(end);
  TORCH_CHECK(a->timing && b->timing,
              "Both events must be created with argument 'enable_timing=True'.");
  auto ma = a->latest();
  auto mb = b->latest();
  TORCH_CHECK(ma && mb, "Both events must be recorded before calculating elapsed time.");
  TORCH_CHECK(ma->is_done() && mb->is_done(),
              "Both events must be completed before calculating elapsed time.");
  return std::chrono::duration<double, std::milli>(mb->when() - ma->when()).count();
}

}  // namespace event
}  // namespace torchtpu::runtime
