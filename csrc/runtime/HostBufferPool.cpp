// HostBufferPool (HostBufferPool.h).
#include "runtime/HostBufferPool.h"

#include "pytorch/Internals.h"

#include <memory>

namespace torchtpu::runtime {

c10::DataPtr HostBufferPool::allocate(size_t nbytes, c10::Device device) {
  void* ptr = nullptr;
  size_t size = nbytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.lower_bound(nbytes);
    if (it != kept_.end() && it->first <= nbytes + nbytes / 4) {
      ptr = it->second;
      size = it->first;
      kept_bytes_ -= size;
      kept_.erase(it);
    }
  }
  if (ptr == nullptr) ptr = c10::alloc_cpu(nbytes);
  return c10::DataPtr(ptr, new Buffer{ptr, size}, &HostBufferPool::give_back, device);
}

void HostBufferPool::give_back(void* context) {
  std::unique_ptr<Buffer> b(static_cast<Buffer*>(context));
  get().keep(b->ptr, b->size);
}

void HostBufferPool::keep(void* ptr, size_t size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_bytes_ + size <= kKeptBytes) {
      kept_.emplace(size, ptr);
      kept_bytes_ += size;
      return;
    }
  }
  c10::free_cpu(ptr);
}

}  // namespace torchtpu::runtime
