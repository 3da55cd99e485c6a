#pragma once
// A pool of large host buffers kept between uses (HostBufferPool.cpp).
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <map>
#include <mutex>

namespace torchtpu::runtime {

// Host memory for matmul results that only their fused epilogue reads (Plan::host_buffer), kept
// for the next flush. A fresh allocation of many MiB is a fresh mapping: its pages fault at the
// first write and are unmapped at the free, at every flush, which costs a large product more
// than its GEMM gains from the fusion (docs/host-speed.md, "A cached region's run"). Up to kKeptBytes are kept; a request takes a kept buffer of at
// least its size and at most a quarter more. (Freed from whichever thread releases the last
// storage.)
class HostBufferPool {
 public:
  static HostBufferPool& get() {
    static auto* pool = new HostBufferPool();  // leaked: buffers may come back during exit
    return *pool;
  }

  c10::DataPtr allocate(size_t nbytes, c10::Device device);

 private:
  static constexpr size_t kKeptBytes = size_t(256) << 20;
  struct Buffer {
    void* ptr;
    size_t size;
  };
  static void give_back(void* context);
  void keep(void* ptr, size_t size);

  std::mutex mutex_;
  std::multimap<size_t, void*> kept_;  // by size
  size_t kept_bytes_ = 0;
};

}  // namespace torchtpu::runtime
