#pragma once
// Streams and events of the simulated device.
//
// A stream is a FIFO work queue run by its own worker thread (started on first use). Work
// enqueued on a stream runs in order; an error raised by a piece of work is kept and rethrown,
// naming the work, at the next synchronization of that stream. Events mark a position in a
// stream: they complete when the worker reaches them, and a stream can be made to wait for an
// event recorded on another stream.
//
// Stream ids per device: 0 is the default stream, 1..kPoolSize the pool handed out round-robin
// by getStreamFromGlobalPool, and ids above that are streams created by getNewStream. Streams
// live until the process ends.
#include "runtime/HostPolicy.h"

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/FunctionRef.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace torchtpu::runtime {

constexpr c10::StreamId kPoolSize = 32;

class StreamQueue;

// Work recorded but not yet enqueued (fused eager's pending graph) is flushed onto the streams
// at every synchronization point: synchronize (device, stream), a stream change, an event record
// (runtime/DeferredWork.h).

// The queue behind a c10::Stream of this device type (created on first use).
StreamQueue& queue_of(const c10::Stream& stream);

class StreamQueue {
 public:
  StreamQueue(c10::DeviceIndex device, c10::StreamId id, int priority);
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  // Appends work; `what` names it in error messages. `then` runs after the work has been
  // counted as completed (an event record: whoever sees the event complete also sees the
  // stream's work up to it complete, as stream queries on CUDA do). On an idle stream the work
  // runs at once on this thread when the host-execution policy says so (HostPolicy.h,
  // runs_on_issuing_thread). `parallel`: the work runs parallel host loops (a GEMM, a pass over many
  // elements); issued on that thread while the stream is busy, it runs there after the queue.
  void enqueue(std::function<void()> work, std::string what, std::function<void()> then = {},
               bool parallel = false);
  // Waits until everything enqueued so far has run; rethrows the first error since the last
  // synchronization.
  void synchronize();
  // True when everything enqueued so far has run.
  bool query() const;
  // Waits until everything enqueued so far has run and releases what the finished work held
  // (its tensors); an error stays for the next synchronize(). Interruptible (HostWait.h).
  // Returns whether it waited for or released anything.
  bool wait_idle();
  // Drops the work not started yet (at exit after an interrupt: nothing may observe it), then
  // waits for the work running now. Returns how many items were dropped.
  size_t cancel_queued();

  // Lets the worker take the work kept for a host thread (HostWaitsNext).
  void release_hold();

  // Runs `work` now on this thread, with the worker's semantics (counted as enqueued and
  // completed in order, its error kept for the next synchronization, its host time counted),
  // when enqueue(work, what, {}, parallel) would run it here at once: the stream idle and this
  // thread one that runs such work itself (HostPolicy.h). False otherwise, having run
  // nothing: the caller then enqueues it. (A kernel's fast path: no closure to build.)
  bool run_here_if_idle(c10::function_ref<void()> work, const std::string& what, bool parallel);

  c10::DeviceIndex device() const { return device_; }
  c10::StreamId id() const { return id_; }
  int priority() const { return priority_; }

 private:
  // Runs `work` on this thread when the stream is idle (nothing queued or running): counted,
  // timed and its error kept for the next synchronization as on the worker. False when busy.
  bool run_inline(c10::function_ref<void()> work, const std::string& what,
                  const std::function<void()>& then);
  // Runs the queued work on this thread, in order, after the item the worker runs now, until
  // nothing is queued or for host_policy::kDrainBudget at most (the rest is left to the
  // worker); the worker takes none meanwhile. Work runs with the worker's semantics
  // (run_inline). It never waits for the GIL, so it takes no interrupt: the wait that follows
  // does.
  void drain();
  friend class HostWaitsNext;  // (run_kept_work drains)
  // Spins briefly (host_policy::kWaitSpin at most) until everything enqueued has run.
  void drained_soon() const;
  struct Impl;
  c10::DeviceIndex device_;
  c10::StreamId id_;
  int priority_;
  std::shared_ptr<Impl> impl_;
};

// Thread-local current stream per device, as in CUDA.
c10::Stream current_stream(c10::DeviceIndex device);
c10::Stream exchange_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream pool_stream(c10::DeviceIndex device);
c10::Stream new_stream(c10::DeviceIndex device, int priority);
// Waits for every stream of a device.
void synchronize_device(c10::DeviceIndex device);
// Waits for every stream of a device to run what it has and releases the memory its finished
// work held, without reporting errors (the allocator, before it fails; see Allocator.cpp).
// Returns whether there was anything to wait for (queued work, or finished work being released).
// Does nothing on a stream worker thread (it cannot wait for its own queue).
bool release_queued_memory(c10::DeviceIndex device);
// Every stream of every device: cancel_queued(). Returns the number of items dropped.
size_t cancel_all_queued_work();

// Told of every event recorded on a stream (recorded) and every stream made to wait for one
// (not recorded), as it is issued; for the cost model's clocks (sim/Ledger.h), which live
// above the runtime. One observer; null: none.
using EventObserver = void (*)(const void* event, const c10::Stream& stream, bool recorded);
void set_event_observer(EventObserver observer);

// Events, as opaque handles for the guard interface.
namespace event {
void record(void** handle, const c10::Stream& stream, c10::EventFlag flag);
void block(void* handle, const c10::Stream& stream);
bool query(void* handle);
void synchronize(void* handle);
void destroy(void* handle) noexcept;
// Milliseconds between two completed, timing-enabled events.
double elapsed_ms(void* start, void* end);
}  // namespace event

}  // namespace torchtpu::runtime
