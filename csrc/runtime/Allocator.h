#pragma once
// The simulated HBM: a caching c10::DeviceAllocator registered for PrivateUse1.
//
// Each device has a capacity (the chip's HBM, or TORCHTPU_HBM_BYTES). Blocks are real host
// memory. Freed blocks stay cached ("reserved") for reuse by a later request of the same size
// class, as CUDA's caching allocator does; reserved bytes count against the capacity. When a
// request does not fit, the cache of that device is released and the request retried; if it
// still does not fit, c10::OutOfMemoryError (torch.OutOfMemoryError) is raised with a message
// in the style of CUDA's, and nothing already allocated is touched.
//
// Size classes: requests are rounded up to 512 bytes up to 1 MiB (the "small pool"), and to
// 2 MiB above (the "large pool"). A cached block is reused only for the same rounded size, so
// no block is split and the waste per live block is below one rounding step.
#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace torchtpu::runtime {

class Allocator final : public c10::DeviceAllocator {
 public:
  using DeviceStats = c10::CachingDeviceAllocator::DeviceStats;

  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallLimit = size_t(1) << 20;
  static constexpr size_t kLargeRound = size_t(2) << 20;
  static size_t round_size(size_t bytes);

  // c10::Allocator
  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // c10::DeviceAllocator
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  // (free, total): free is capacity minus reserved bytes.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Bytes of the live blocks of one device (memory_allocated), read without materializing
  // anything (see below).
  size_t allocated_bytes(c10::DeviceIndex device);
  // Allocates on an explicit device (allocate() uses the current device).
  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t bytes);
  // Releases the cached blocks of one device.
  void empty_cache(c10::DeviceIndex device);
  // The device owning a pointer from this allocator (any pointer inside a live block), or -1.
  c10::DeviceIndex device_of(const void* ptr) const;
};

// The registered instance.
Allocator& allocator();

// Tensors can exist before they have memory (fused eager's pending storages). Memory statistics
// count every live tensor, as CUDA's do: reading them (getDeviceStats, getMemoryInfo) or
// resetting the peak first gives memory to everything pending (runtime/DeferredWork.h,
// FlushReason::memory_statistics).

// While one is alive on a thread, CPU allocations made on that thread come from the simulated
// HBM of `device` (their DataPtr still says CPU). Host code that creates new results on behalf
// of a TPU kernel runs under it, so that those results already live in device memory and can
// be handed to TPU tensors without a copy (take_device_block). Installs a forwarding CPU
// allocator on first use; other threads and other times are unaffected.
class HostAllocationsOnDevice {
 public:
  explicit HostAllocationsOnDevice(c10::DeviceIndex device);
  ~HostAllocationsOnDevice();
  HostAllocationsOnDevice(const HostAllocationsOnDevice&) = delete;
  HostAllocationsOnDevice& operator=(const HostAllocationsOnDevice&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// If `data` (a CPU DataPtr) is a block of the simulated HBM, moves it out of `data` and
// returns it re-labelled with its TPU device; otherwise returns an empty DataPtr and leaves
// `data` alone.
c10::DataPtr take_device_block(c10::DataPtr& data);

// True for memory of a dry run's tensor: an address with no values behind it (Mode.h).
bool is_dry_memory(const void* ptr);

// ---- Memory history and snapshots (torch.tpu.memory, in the format of torch.cuda.memory).

// What gathers the context (stack frames) of an allocation or free; may return null.
using ContextGatherer = std::shared_ptr<c10::GatheredContext> (*)();
// Starts (gatherer non-null) or stops recording every allocation and free, keeping the last
// `max_entries` events per device.
void record_memory_history(ContextGatherer gatherer, size_t max_entries);

struct MemoryEvent {
  bool alloc = true;  // else a free
  uintptr_t address = 0;
  size_t size = 0;
  int64_t time_us = 0;
  std::shared_ptr<c10::GatheredContext> context;
};
struct MemoryBlock {
  uintptr_t address = 0;
  size_t size = 0, requested = 0;
  bool allocated = false, dry = false;
  std::shared_ptr<c10::GatheredContext> context;  // of its allocation, while history is on
};
struct MemorySnapshot {
  std::vector<std::vector<MemoryBlock>> blocks;   // per device
  std::vector<std::vector<MemoryEvent>> events;   // per device, oldest first
};
MemorySnapshot memory_snapshot();


// Host memory handed out for pin_memory(): PyTorch's caching host allocator over ordinary host
// memory (registered as the host allocator of PrivateUse1: torch.accelerator.empty_host_cache(),
// host memory statistics), remembered so that is_pinned() can answer.
c10::Allocator& pinned_allocator();
bool is_pinned_ptr(const void* ptr);

}  // namespace torchtpu::runtime
