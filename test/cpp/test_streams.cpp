// Streams and events: ordering, query, synchronize, cross-stream waits, errors, timing.
#include "runtime/Device.h"
#include "runtime/OpenMP.h"
#include "runtime/Stream.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace torchtpu::runtime;
using namespace std::chrono_literals;

namespace {

c10::impl::VirtualGuardImpl guard() { return c10::impl::VirtualGuardImpl(c10::DeviceType::PrivateUse1); }

TEST(Streams, WorkRunsInOrderOnTheWorkerThread) {
  auto stream = new_stream(0, 0);
  auto& q = queue_of(stream);
  std::vector<int> seen;
  std::mutex m;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> other_thread{true};
  for (int i = 0; i < 100; ++i) {
    q.enqueue(
        [&, i] {
          if (std::this_thread::get_id() == caller) other_thread = false;
          std::lock_guard<std::mutex> lock(m);
          seen.push_back(i);
        },
        "append");
  }
  // (Waited for without a synchronization, which on this thread runs the queued work itself.)
  while (!q.query()) std::this_thread::sleep_for(100us);
  q.synchronize();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_TRUE(other_thread);
}

// The inline level for one test (the suite runs with 0: main.cpp).
class InlineLevel {
 public:
  explicit InlineLevel(int level) : previous_(inline_work()) { set_inline_work(level); }
  ~InlineLevel() { set_inline_work(previous_); }

 private:
  int previous_;
};

TEST(Streams, ASynchronizeOnTheInitialThreadRunsTheQueuedWorkInOrderAfterTheWorkersItem) {
  // (GoogleTest runs tests on the process's initial thread, which keeps its OpenMP team.)
  ASSERT_TRUE(on_initial_thread());
  const InlineLevel level(1);
  auto stream = new_stream(0, 0);
  auto& q = queue_of(stream);
  std::atomic<bool> started{false}, release{false}, gate_done{false};
  {
    const WorkerOnly on_the_worker;
    q.enqueue(
        [&] {
          started = true;
          while (!release) std::this_thread::sleep_for(1ms);
          gate_done = true;
        },
        "gate");
  }
  while (!started) std::this_thread::sleep_for(100us);  // the worker runs the gate now
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::atomic<bool> gate_first{true};
  auto append = [&](int i) {
    return [&, i] {
      if (!gate_done) gate_first = false;
      std::lock_guard<std::mutex> lock(m);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    };
  };
  for (int i = 0; i < 10; ++i) q.enqueue(append(i), "append");
  q.enqueue([] { TORCH_CHECK(false, "boom"); }, "aten::broken");
  for (int i = 10; i < 20; ++i) q.enqueue(append(i), "append");
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    release = true;
  });
  try {
    q.synchronize();
    ADD_FAILURE() << "the error was not reported";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::broken"), std::string::npos) << e.what();
  }
  releaser.join();
  EXPECT_TRUE(gate_first);
  ASSERT_EQ(order.size(), 20u);  // (the work after the failed item ran too, as on the worker)
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(order[i], i);
    EXPECT_EQ(threads[i], caller);
  }
  // The worker takes new work again.
  std::atomic<bool> on_worker{false};
  {
    const WorkerOnly on_the_worker;
    q.enqueue([&] { on_worker = std::this_thread::get_id() != caller; }, "after");
  }
  while (!q.query()) std::this_thread::sleep_for(100us);
  EXPECT_TRUE(on_worker);
  q.synchronize();
}

TEST(Streams, TheThreadWithTheOpenMPTeamRunsWorkItselfAndParallelWorkAfterTheQueue) {
  // At the default level, the initial thread (which keeps the process's OpenMP team) runs work
  // on an idle stream itself; parallel work issued while the stream is busy runs there too,
  // after the queued work (which it runs itself, after the worker's item), in order. Another
  // thread hands its work to the worker.
  ASSERT_TRUE(on_initial_thread());
  const InlineLevel level(1);
  auto& q = queue_of(new_stream(0, 0));
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<std::pair<int, std::thread::id>> ran;
  auto record = [&](int i) {
    return [&, i] {
      std::lock_guard<std::mutex> lock(m);
      ran.emplace_back(i, std::this_thread::get_id());
    };
  };
  q.enqueue(record(0), "small on an idle stream");
  std::atomic<bool> started{false}, release{false};
  {
    const WorkerOnly on_the_worker;
    q.enqueue([&] {
      started = true;
      while (!release) std::this_thread::sleep_for(1ms);
    }, "gate");
  }
  while (!started) std::this_thread::sleep_for(100us);
  q.enqueue(record(1), "small behind the gate");  // (busy: queued)
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    release = true;
  });
  q.enqueue(record(2), "parallel", {}, /*parallel=*/true);
  releaser.join();
  std::thread other([&] {
    q.enqueue(record(3), "from another thread", {}, true);
    q.synchronize();  // (here a wait for the worker: this thread runs no queued work)
  });
  other.join();
  q.synchronize();
  ASSERT_EQ(ran.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ran[i].first, i);
  EXPECT_EQ(ran[0].second, caller);
  EXPECT_EQ(ran[1].second, caller);  // (run by the caller's drain, once the gate was done)
  EXPECT_EQ(ran[2].second, caller);
  EXPECT_NE(ran[3].second, caller);
}

TEST(Streams, QueryReflectsPendingWork) {
  auto stream = new_stream(0, 0);
  auto& q = queue_of(stream);
  std::atomic<bool> release{false};
  q.enqueue([&] { while (!release) std::this_thread::sleep_for(1ms); }, "spin");
  EXPECT_FALSE(q.query());
  EXPECT_FALSE(guard().queryStream(stream));
  release = true;
  guard().synchronizeStream(stream);
  EXPECT_TRUE(q.query());
}

TEST(Streams, ErrorsSurfaceAtSynchronizeNamingTheWork) {
  auto stream = new_stream(1, 0);
  auto& q = queue_of(stream);
  q.enqueue([] { TORCH_CHECK(false, "boom"); }, "aten::broken");
  try {
    q.synchronize();
    FAIL() << "expected the error";
  } catch (const c10::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("aten::broken"), std::string::npos) << message;
    EXPECT_NE(message.find("boom"), std::string::npos) << message;
    EXPECT_NE(message.find("tpu:1"), std::string::npos) << message;
  }
  // The error is reported once; the stream keeps working.
  std::atomic<int> ran{0};
  q.enqueue([&] { ran++; }, "after");
  q.synchronize();
  EXPECT_EQ(ran, 1);
}

// An error reported at synchronization keeps its kind (an IndexError stays an IndexError).
TEST(Streams, ErrorsKeepTheirKindAtSynchronize) {
  auto& q = queue_of(new_stream(1, 0));
  q.enqueue([] { TORCH_CHECK_INDEX(false, "index 7 is out of bounds"); }, "aten::index");
  EXPECT_THROW(q.synchronize(), c10::IndexError);
  q.enqueue([] { TORCH_CHECK_VALUE(false, "bad value"); }, "aten::value");
  EXPECT_THROW(q.synchronize(), c10::ValueError);
}

// After an interrupt at exit, work not started yet is dropped; the running item finishes and
// events recorded behind the dropped work complete (nothing waits forever).
TEST(Streams, CancelDropsQueuedWorkAndCompletesEvents) {
  auto stream = new_stream(1, 0);
  auto& q = queue_of(stream);
  std::atomic<bool> started{false}, go{false};
  std::atomic<int> ran{0};
  q.enqueue([&] {
    started = true;
    while (!go.load()) std::this_thread::sleep_for(1ms);
    ran++;
  }, "running");
  for (int i = 0; i < 5; ++i) q.enqueue([&] { ran++; }, "queued");
  void* handle = nullptr;
  event::record(&handle, stream, c10::EventFlag::PYTORCH_DEFAULT);
  while (!started.load()) std::this_thread::sleep_for(1ms);
  std::thread release([&] {
    std::this_thread::sleep_for(20ms);
    go = true;
  });
  EXPECT_EQ(q.cancel_queued(), 6u);  // five items and the event's mark
  release.join();
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(q.query());
  EXPECT_TRUE(event::query(handle));
  event::destroy(handle);
  q.enqueue([&] { ran++; }, "after");  // the stream keeps working
  q.synchronize();
  EXPECT_EQ(ran, 2);
}

TEST(Streams, CurrentStreamIsThreadLocalAndExchangeable) {
  auto s = new_stream(0, 0);
  EXPECT_EQ(current_stream(0), default_stream(0));
  auto previous = guard().exchangeStream(s);
  EXPECT_EQ(previous, default_stream(0));
  EXPECT_EQ(guard().getStream(c10::Device(c10::DeviceType::PrivateUse1, 0)), s);
  std::thread([&] { EXPECT_EQ(current_stream(0), default_stream(0)); }).join();
  guard().exchangeStream(previous);
  EXPECT_EQ(current_stream(0), default_stream(0));
}

TEST(Streams, PoolStreamsAreDistinctFromTheDefault) {
  auto a = pool_stream(0);
  auto b = pool_stream(0);
  EXPECT_NE(a, default_stream(0));
  EXPECT_NE(a, b);
  queue_of(a).synchronize();
}

TEST(Events, CompleteWhenTheStreamReachesThem) {
  auto g = guard();
  auto stream = new_stream(0, 0);
  std::atomic<bool> release{false};
  queue_of(stream).enqueue([&] { while (!release) std::this_thread::sleep_for(1ms); }, "spin");
  void* event = nullptr;
  g.record(&event, stream, 0, c10::EventFlag::PYTORCH_DEFAULT);
  EXPECT_FALSE(g.queryEvent(event));
  release = true;
  g.synchronizeEvent(event);
  EXPECT_TRUE(g.queryEvent(event));
  g.destroyEvent(event, 0);
}

TEST(Events, NeverRecordedEventIsComplete) {
  EXPECT_TRUE(guard().queryEvent(nullptr));
}

TEST(Events, BlockMakesAStreamWaitForAnother) {
  auto g = guard();
  auto producer = new_stream(0, 0);
  auto consumer = new_stream(0, 0);
  std::atomic<bool> release{false};
  std::atomic<int> value{0};
  queue_of(producer).enqueue(
      [&] {
        while (!release) std::this_thread::sleep_for(1ms);
        value = 42;
      },
      "produce");
  void* event = nullptr;
  g.record(&event, producer, 0, c10::EventFlag::PYTORCH_DEFAULT);
  g.block(event, consumer);
  std::atomic<int> observed{-1};
  queue_of(consumer).enqueue([&] { observed = value.load(); }, "consume");
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(queue_of(consumer).query()) << "the consumer must wait for the event";
  release = true;
  queue_of(consumer).synchronize();
  EXPECT_EQ(observed, 42);
  g.destroyEvent(event, 0);
}

TEST(Events, ElapsedTimeNeedsTimingAndMeasures) {
  auto g = guard();
  auto stream = new_stream(0, 0);
  void* start = nullptr;
  void* end = nullptr;
  g.record(&start, stream, 0, c10::EventFlag::BACKEND_DEFAULT);
  queue_of(stream).enqueue([] { std::this_thread::sleep_for(30ms); }, "sleep");
  g.record(&end, stream, 0, c10::EventFlag::BACKEND_DEFAULT);
  g.synchronizeEvent(end);
  const double ms = g.elapsedTime(start, end, 0);
  EXPECT_GE(ms, 29.0);
  EXPECT_LT(ms, 5000.0);

  void* untimed = nullptr;
  g.record(&untimed, stream, 0, c10::EventFlag::PYTORCH_DEFAULT);
  g.synchronizeEvent(untimed);
  EXPECT_THROW(g.elapsedTime(start, untimed, 0), c10::Error);
  for (void* e : {start, end, untimed}) g.destroyEvent(e, 0);
}

TEST(Events, SynchronizeDeviceWaitsForAllStreams) {
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) {
    queue_of(new_stream(1, 0)).enqueue([&] { std::this_thread::sleep_for(5ms); done++; }, "work");
  }
  guard().synchronizeDevice(1);
  EXPECT_EQ(done, 4);
}

}  // namespace
