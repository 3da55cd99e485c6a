#pragma once
// Parallel host loops over blocks that are not ATen's (the blocks of a fused region,
// defer/FusedRegion.h): parallel_blocks runs them on the calling thread's OpenMP team where
// torch's OpenMP runtime is loaded, else on BlockPool, a persistent pool of helper threads.
#include "runtime/OpenMP.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>

namespace torchtpu::runtime {

// The helper threads of parallel blocks: one persistent pool of ATen's intra-op thread count minus
// one, started on first use and kept for the process (fused regions used to start fresh threads
// for every region). Each helper sets its OpenMP team to one thread: the kernels inside a block
// run serially. (A small pool of its own rather than c10::ThreadPool, whose lock lives in
// libc10, which is not instrumented: ThreadSanitizer must see every lock of this code.)
class BlockPool {
 public:
  explicit BlockPool(int helpers);
  // Runs `task` on a helper (whichever is free first).
  void run(std::function<void()> task);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
};

// The process's pool: ATen's intra-op thread count minus one helpers (at least one), started at
// first use, never destroyed.
BlockPool& block_pool();

// Hands out the blocks of [0, blocks) one at a time, to whichever thread asks first; -1 when
// none is left (or after stop()).
struct BlockCounter {
  std::atomic<int64_t> next{0};
  int64_t blocks = 0;
  explicit BlockCounter(int64_t n) : blocks(n) {}
  int64_t operator()() {
    const int64_t b = next.fetch_add(1, std::memory_order_relaxed);
    return b < blocks ? b : -1;
  }
  void stop() { next.store(blocks, std::memory_order_relaxed); }
};

// Runs fn(next) on the calling thread and on up to ATen's intra-op thread count minus one other
// threads; each runs the blocks next() hands out (BlockCounter). The other threads are the
// calling thread's OpenMP team, where torch's OpenMP runtime is loaded: the team that runs
// ATen's and MKL's parallel loops, so the region does not compete for the cores with that
// team's threads, which spin for a while after each parallel loop (docs/host-speed.md).
// Elsewhere, and under ThreadSanitizer (which does not see OpenMP's
// synchronization), the pool's helpers. (at::parallel_for is an inline OpenMP template that this
// library, built without OpenMP, would run serially.) The blocks are at most one ATen grain
// each, so the kernels inside run serially.
template <typename F>
void parallel_blocks(int64_t blocks, int64_t numel, const F& fn) {
  BlockCounter counter(blocks);
  auto next = [&counter] { return counter(); };
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), blocks);
  if (threads <= 1 || numel < host_policy::kParallelBlocksMinNumel) {
    fn(next);
    return;
  }
  std::mutex mutex;
  std::exception_ptr error;
  auto run = [&] {  // (nothing may leave an OpenMP region or a pool task by an exception)
    try {
      fn(next);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
      counter.stop();  // the others stop at their next block
    }
  };
#if !defined(__SANITIZE_THREAD__)
  if (GOMP_parallel != nullptr && omp_in_parallel != nullptr && !omp_in_parallel()) {
    GOMP_parallel([](void* data) { (*static_cast<decltype(run)*>(data))(); }, &run,
                  static_cast<unsigned>(threads), 0);
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  std::condition_variable done;
  int64_t pending = threads - 1;
  for (int64_t t = 1; t < threads; ++t) {
    block_pool().run([&] {
      run();
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0) done.notify_all();
    });
  }
  run();
  {
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace torchtpu::runtime
