#pragma once
// A position in a stream's queue, completed and timed by the stream when it reaches it (as the
// `then` of an enqueued item: StreamQueue::enqueue). One type for every such mark: each
// recording of a torch.tpu.Event is one (runtime/Event.cpp), and so is each device event the
// autograd profiler's fallback mode records around an op (api/Profiler.cpp).
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace torchtpu::runtime {

class StreamMark {
 public:
  // Reached now: records the time and wakes whoever waits.
  void complete();
  // Waits until it is reached: interruptibly on a host thread (runtime/HostWait.h), plainly on
  // a stream's worker (an event wait enqueued on another stream).
  void wait();
  bool is_done();
  // When it was reached (once is_done()).
  std::chrono::steady_clock::time_point when();
  // wait(), then when().
  std::chrono::steady_clock::time_point reached();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point when_;
};

}  // namespace torchtpu::runtime
