// BlockPool (BlockPool.h): the helper threads of parallel host loops over blocks.
#include "runtime/BlockPool.h"

#include <thread>

namespace torchtpu::runtime {

BlockPool::BlockPool(int helpers) {
  for (int i = 0; i < helpers; ++i) {
    std::thread([this] {
      if (omp_set_num_threads != nullptr) omp_set_num_threads(1);
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          ready_.wait(lock, [&] { return !tasks_.empty(); });
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    }).detach();  // (the pool lives for the process, like the stream workers)
  }
}

void BlockPool::run(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

BlockPool& block_pool() {
  static auto* pool = new BlockPool(std::max(1, at::get_num_threads() - 1));  // (leaked)
  return *pool;
}

}  // namespace torchtpu::runtime
