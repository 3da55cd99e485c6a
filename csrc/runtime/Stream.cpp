#include "runtime/Stream.h"

#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Env.h"
#include "runtime/Errors.h"
#include "runtime/HostPolicy.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/OpenMP.h"

#include <ATen/Parallel.h>
#include "pytorch/Internals.h"
#include <c10/util/Exception.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>

namespace torchtpu::runtime {

namespace {
// Batches of finished work being destroyed by host threads right now (outside the queues' locks).
// The memory their captures hold is about to be freed: release_queued_memory waits for them.
std::atomic<int> g_releasing{0};
std::mutex g_release_mutex;
std::condition_variable g_released;
thread_local int t_releasing = 0;  // batches this thread is destroying (their destructors may
                                   // allocate: such an allocation must not wait for itself)

// Finished work taken from a queue (under its lock) and destroyed when this goes (after it).
class FinishedWork {
 public:
  FinishedWork() = default;
  explicit FinishedWork(std::vector<std::function<void()>> items) : items_(std::move(items)) {
    if (!items_.empty()) ++g_releasing;
  }
  FinishedWork(const FinishedWork&) = delete;
  FinishedWork& operator=(const FinishedWork&) = delete;
  FinishedWork& operator=(FinishedWork&& other) noexcept {
    release();
    items_ = std::move(other.items_);
    other.items_.clear();
    return *this;
  }
  ~FinishedWork() { release(); }

 private:
  void release() {
    if (items_.empty()) return;
    ++t_releasing;
    items_.clear();
    --t_releasing;
    if (--g_releasing == 0) {
      std::lock_guard<std::mutex> lock(g_release_mutex);
      g_released.notify_all();
    }
  }
  std::vector<std::function<void()>> items_;
};
}  // namespace

// ---------------------------------------------------------------------------------------------
// StreamQueue

struct StreamQueue::Impl {
  struct Item {
    std::function<void()> work;
    std::string what;
    std::function<void()> then;
  };
  mutable std::mutex mutex;
  std::condition_variable cv;       // work arrived
  std::condition_variable drained;  // completed caught up with enqueued
  std::deque<Item> items;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  std::exception_ptr error;
  std::string error_what;
  bool started = false;
  // Work that has run, destroyed later by a host thread (see take_finished): its captures may
  // be the last owners of tensors that Python also refers to, and releasing those needs the
  // GIL, which a host thread waiting for this stream may hold.
  std::vector<std::function<void()>> finished;

  FinishedWork take_finished() {
    std::vector<std::function<void()>> out;
    out.swap(finished);
    return FinishedWork(std::move(out));
  }

  std::atomic<size_t> queued{0};  // items.size(), readable without the lock
  bool parked = false;            // the worker waits on `cv` (enqueue must notify it)
  bool running_inline = false;    // a host thread runs items itself (enqueue, drain): the
                                  // worker takes none meanwhile
  bool worker_running = false;    // the worker runs an item it took
  bool held = false;  // queued work kept for the host thread that waits next (HostWaitsNext)
  std::condition_variable worker_done;  // the worker finished an item while running_inline

  // Runs one item's work, its host time counted; the exception it raised, if any. Device work
  // runs below autograd, whichever thread runs it: its host aliases are made by the issuing
  // thread, as inference tensors under torch.inference_mode(), and a worker outside that mode
  // would refuse to write them ("Inplace update to inference tensor outside InferenceMode").
  static std::exception_ptr run_timed(c10::function_ref<void()> work, const std::string& what) {
    const metrics::HostTime timed(what);
    const c10::impl::ExcludeDispatchKeyGuard below_autograd(
        c10::autograd_dispatch_keyset_with_ADInplaceOrView);
    try {
      work();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }

  // Under the lock: an item has run. Its error is kept for the next synchronization (the first
  // since the last one), it counts as completed, and then `then` runs: whoever sees the stream
  // drained sees `then` done, and the reverse. (`then` must not take this lock: an event's mark
  // has its own.)
  void completed_locked(std::exception_ptr failure, const std::string& what,
                        const std::function<void()>& then) {
    if (failure && !error) {
      error = failure;
      error_what = what;
    }
    ++completed;
    if (then) then();
    completed_atomic.store(completed, std::memory_order_release);
    if (completed == enqueued) drained.notify_all();
  }

  void run() {
    const StreamWorkScope worker;  // (for the thread's life)
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (items.empty() || running_inline || held) {
        if (items.empty()) {
          lock.unlock();
          const auto until = std::chrono::steady_clock::now() + host_policy::kWorkerSpin;
          while (queued.load(std::memory_order_acquire) == 0 &&
                 std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
          }
          lock.lock();
        }
        parked = true;
        const auto ready = [&] { return !items.empty() && !running_inline && !held; };
        if (!cv.wait_for(lock, host_policy::kWorkerTeamIdle, ready)) {
          // Idle for a while: the OpenMP team this thread started, if any, ends (OpenMP.h).
          lock.unlock();
          release_openmp_team();
          lock.lock();
          cv.wait(lock, ready);
        }
        parked = false;
      }
      Item item = std::move(items.front());
      items.pop_front();
      queued.store(items.size(), std::memory_order_release);
      worker_running = true;
      lock.unlock();
      std::exception_ptr failure = run_timed(item.work, item.what);
      lock.lock();
      finished.push_back(std::move(item.work));
      completed_locked(failure, item.what, item.then);
      worker_running = false;
      if (running_inline) worker_done.notify_all();  // (a host thread waits to drain the queue)
    }
  }
  std::atomic<uint64_t> completed_atomic{0};  // `completed`, readable without the lock
  std::atomic<uint64_t> enqueued_atomic{0};   // `enqueued`, readable without the lock
};

StreamQueue::StreamQueue(c10::DeviceIndex device, c10::StreamId id, int priority)
    : device_(device), id_(id), priority_(priority), impl_(std::make_shared<Impl>()) {}


bool StreamQueue::run_inline(c10::function_ref<void()> work, const std::string& what,
                             const std::function<void()>& then) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  Impl& s = *impl_;
  if (!s.items.empty() || s.completed != s.enqueued || s.running_inline) return false;
  FinishedWork finished = s.take_finished();  // (destroyed on return, outside the lock)
  s.running_inline = true;
  ++s.enqueued;
  s.enqueued_atomic.store(s.enqueued, std::memory_order_release);
  lock.unlock();
  // As on the worker: the work may not synchronize this stream, and an allocation inside it
  // that runs short of memory must not wait for this stream (it would wait for itself).
  std::exception_ptr failure;
  {
    const StreamWorkScope as_the_worker;
    failure = Impl::run_timed(work, what);
  }
  TORCHTPU_COUNT("stream.work_run_inline");
  lock.lock();
  s.completed_locked(failure, what, then);  // (its error reported as the worker's are)
  s.running_inline = false;
  if (!s.items.empty() && s.parked) s.cv.notify_one();  // (queued behind it meanwhile)
  lock.unlock();
  return true;
}

bool StreamQueue::run_here_if_idle(c10::function_ref<void()> work, const std::string& what,
                                   bool parallel) {
  return runs_on_issuing_thread(parallel) && run_inline(work, what, {});
}

void StreamQueue::enqueue(std::function<void()> work, std::string what,
                          std::function<void()> then, bool parallel) {
  if (runs_on_issuing_thread(parallel) && run_inline(work, what, then)) {
    work = nullptr;  // its captures (the tensors it held) go now, on this host thread
    return;
  }
  // Parallel work issued on the thread with the OpenMP team while the stream is busy: this
  // thread runs the queued work itself (drain, after the worker's item), then this work.
  if (runs_after_drain(parallel)) {
    wait_idle();
    if (run_inline(work, what, then)) {
      TORCHTPU_COUNT("stream.work_run_inline_after_drain");
      work = nullptr;
      return;
    }
  }
  // Under HostWaitsNext on the thread with the OpenMP team, work that does not run here now is
  // kept for this thread's synchronization that follows (drain), not started by the worker: run
  // there, its loops would start a second team beside this thread's (OpenMP.h).
  const bool hold = keeps_work_for_issuing_thread();
  FinishedWork finished;  // destroyed here, after the lock is released
  std::lock_guard<std::mutex> lock(impl_->mutex);
  finished = impl_->take_finished();
  if (hold) {
    if (!impl_->held) {
      impl_->held = true;
      keep_for_issuing_thread(this);
    }
    metrics::count("stream.work_kept_for_host");
  }
  if (!impl_->started) {
    // The worker holds its own reference to the state and is detached: streams live for the
    // whole process, and joining threads during static destruction could hang.
    std::thread([impl = impl_, name = "tpu" + std::to_string(int(device_)) + "-stream" +
                                       std::to_string(id_)] {
      // (Named for perf, py-spy and top; Linux keeps the first 15 characters.)
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      // Kernels run here use ATen's intra-op thread count, as on every thread (a new thread
      // would otherwise run OpenMP regions with its default settings).
      at::init_num_threads();
      impl->run();
    }).detach();
    impl_->started = true;
  }
  impl_->items.push_back({std::move(work), std::move(what), std::move(then)});
  ++impl_->enqueued;
  impl_->enqueued_atomic.store(impl_->enqueued, std::memory_order_release);
  impl_->queued.store(impl_->items.size(), std::memory_order_release);
  if (impl_->parked) impl_->cv.notify_one();  // (a spinning worker sees `queued`)
}

void StreamQueue::release_hold() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->held = false;
  if (!impl_->items.empty() && impl_->parked) impl_->cv.notify_one();
}

void StreamQueue::drain() {
  Impl& s = *impl_;
  if (s.queued.load(std::memory_order_acquire) == 0) return;
  // Work this thread kept on other streams goes to their workers first: an item here may wait
  // for an event of theirs.
  release_kept_work_except(this);
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.items.empty() || s.running_inline) return;
  s.running_inline = true;  // the worker takes no more items
  s.held = false;           // (this thread takes over what was kept for it)
  // While this thread owns the queue it never waits for the GIL (taking a Ctrl-C needs it, and
  // a thread holding the GIL may be waiting for this very queue: the stress suite's interrupted
  // rounds deadlocked so), so it takes no interrupt: it runs items for
  // host_policy::kDrainBudget at most, then leaves the rest to the worker and waits as any host
  // wait does, interruptibly.
  s.worker_done.wait(lock, [&] { return !s.worker_running; });  // (one item, no GIL needed)
  const auto until = std::chrono::steady_clock::now() + host_policy::kDrainBudget;
  while (!s.items.empty() && std::chrono::steady_clock::now() < until) {
    Impl::Item item = std::move(s.items.front());
    s.items.pop_front();
    s.queued.store(s.items.size(), std::memory_order_release);
    lock.unlock();
    // As on the worker (see run_inline).
    std::exception_ptr failure;
    {
      const StreamWorkScope as_the_worker;
      failure = Impl::run_timed(item.work, item.what);
    }
    metrics::count("stream.work_drained");
    lock.lock();
    s.finished.push_back(std::move(item.work));  // (released as the worker's are)
    s.completed_locked(failure, item.what, item.then);
  }
  s.running_inline = false;
  if (!s.items.empty() && s.parked) s.cv.notify_one();
}

void StreamQueue::drained_soon() const {
  // A host thread about to wait for this stream spins this long first: small work finishes in
  // microseconds, and a parked waiter is woken by a futex, which costs as much again.
  const auto until = std::chrono::steady_clock::now() + host_policy::kWaitSpin;
  do {
    if (impl_->completed_atomic.load(std::memory_order_acquire) ==
        impl_->enqueued_atomic.load(std::memory_order_acquire)) {
      return;
    }
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
}

void StreamQueue::synchronize() {
  // Work running on a stream's worker waits for nothing: its queue would wait for it (a kernel
  // that reached a synchronizing op with a device tensor it should have had on the host hung
  // the process this way). An error names it instead.
  TORCH_CHECK(!on_stream_worker(), "torchtpu internal error: work running on a TPU stream asked to "
              "synchronize tpu:", int(device_), ", which would wait for itself; please report "
              "the op that failed with this message");
  flush_deferred_work(FlushReason::stream_synchronize);
  // The process's OpenMP team is on this thread: the work still queued runs here (OpenMP.h).
  if (issuing_thread_drains()) drain();
  drained_soon();
  FinishedWork finished;  // destroyed on return, after the lock
  std::unique_lock<std::mutex> lock(impl_->mutex);
  wait_interruptibly(lock, impl_->drained, [&] { return impl_->completed == impl_->enqueued; });
  finished = impl_->take_finished();
  if (impl_->error) {
    auto error = impl_->error;
    auto what = impl_->error_what;
    impl_->error = nullptr;
    lock.unlock();
    rethrow_with_context(error, "TPU error in '" + what + "' on tpu:" +
                                    std::to_string(int(device_)) + " stream " +
                                    std::to_string(id_) + " (reported at synchronization): ");
  }
}

bool StreamQueue::query() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->completed == impl_->enqueued;
}

bool StreamQueue::wait_idle() {
  // Work kept for this thread (a wait for memory in the middle of a fused graph) runs here
  // first: the worker would not start it.
  if (issuing_thread_drains()) drain();
  FinishedWork finished;  // destroyed on return, after the lock
  std::unique_lock<std::mutex> lock(impl_->mutex);
  const bool busy = impl_->completed != impl_->enqueued || !impl_->finished.empty();
  wait_interruptibly(lock, impl_->drained, [&] { return impl_->completed == impl_->enqueued; });
  finished = impl_->take_finished();
  return busy;
}

size_t StreamQueue::cancel_queued() {
  std::deque<Impl::Item> dropped;  // destroyed on return, after the lock
  FinishedWork finished;
  std::unique_lock<std::mutex> lock(impl_->mutex);
  dropped.swap(impl_->items);
  // The dropped items count as run; their `then` (event marks) complete, so nothing waits on
  // them forever.
  for (auto& item : dropped) {
    ++impl_->completed;
    if (item.then) item.then();
  }
  impl_->queued.store(0, std::memory_order_release);
  impl_->completed_atomic.store(impl_->completed, std::memory_order_release);
  if (impl_->completed == impl_->enqueued) impl_->drained.notify_all();
  impl_->drained.wait(lock, [&] { return impl_->completed == impl_->enqueued; });
  finished = impl_->take_finished();
  return dropped.size();
}

// ---------------------------------------------------------------------------------------------
// Registry of queues and current streams

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::map<c10::StreamId, std::unique_ptr<StreamQueue>>> queues;
  std::vector<c10::StreamId> next_new_id;
  std::vector<c10::StreamId> next_pool_id;
};

Registry& registry() {
  static auto* r = [] {
    auto* reg = new Registry();  // leaked on purpose, see StreamQueue::enqueue
    reg->queues.resize(device_count());
    reg->next_new_id.assign(device_count(), kPoolSize + 1);
    reg->next_pool_id.assign(device_count(), 0);
    return reg;
  }();
  return *r;
}

thread_local std::vector<c10::StreamId> tls_current;  // per device; empty means default

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, tpu_device(device), id);
}

}  // namespace

StreamQueue& queue_of(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "Expected a TPU stream, got a stream of device ", stream.device());
  // The last queue this thread asked for (queues live for the process): a launch finds its
  // stream's queue without the registry's lock.
  thread_local c10::Stream last_stream = c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU));
  thread_local StreamQueue* last_queue = nullptr;
  if (last_queue != nullptr && stream == last_stream) return *last_queue;
  check_device_index(stream.device_index());
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slot = r.queues[stream.device_index()][stream.id()];
  if (!slot) {
    TORCH_CHECK(stream.id() >= 0 && stream.id() < r.next_new_id[stream.device_index()],
                "Unknown TPU stream id ", stream.id());
    slot = std::make_unique<StreamQueue>(stream.device_index(), stream.id(), 0);
  }
  last_stream = stream;
  last_queue = slot.get();
  return *slot;
}

c10::Stream current_stream(c10::DeviceIndex device) {
  check_device_index(device);
  if (static_cast<size_t>(device) < tls_current.size()) {
    return make_stream(device, tls_current[device]);
  }
  return default_stream(device);
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  auto device = stream.device_index();
  auto previous = current_stream(device);
  if (previous != stream) flush_deferred_work(FlushReason::stream_change);
  if (tls_current.size() <= static_cast<size_t>(device)) tls_current.resize(device + 1, 0);
  tls_current[device] = stream.id();
  return previous;
}

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make_stream(device, 0);
}

c10::Stream pool_stream(c10::DeviceIndex device) {
  check_device_index(device);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto id = 1 + (r.next_pool_id[device]++ % kPoolSize);
  return make_stream(device, id);
}

c10::Stream new_stream(c10::DeviceIndex device, int priority) {
  check_device_index(device);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto id = r.next_new_id[device]++;
  r.queues[device][id] = std::make_unique<StreamQueue>(device, id, priority);
  return make_stream(device, id);
}

namespace {
std::vector<StreamQueue*> queues_of(c10::DeviceIndex device) {
  std::vector<StreamQueue*> queues;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [id, q] : r.queues[device]) queues.push_back(q.get());
  return queues;
}
}  // namespace

void synchronize_device(c10::DeviceIndex device) {
  flush_deferred_work(FlushReason::device_synchronize);
  check_device_index(device);
  for (auto* q : queues_of(device)) q->synchronize();
}

bool release_queued_memory(c10::DeviceIndex device) {
  if (on_stream_worker()) return false;
  check_device_index(device);
  bool busy = g_releasing.load() > t_releasing;
  for (auto* q : queues_of(device)) busy = q->wait_idle() || busy;
  // Finished work another thread took from these queues may still be being destroyed.
  without_gil([] {
    std::unique_lock<std::mutex> lock(g_release_mutex);
    wait_interruptibly(lock, g_released, [] { return g_releasing.load() <= t_releasing; });
  });
  return busy;
}

size_t cancel_all_queued_work() {
  size_t dropped = 0;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    for (auto* q : queues_of(d)) dropped += q->cancel_queued();
  }
  return dropped;
}

}  // namespace torchtpu::runtime
