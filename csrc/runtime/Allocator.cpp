#include "runtime/Allocator.h"

#include "runtime/ChipSpec.h"
#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Log.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Event.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torchtpu::runtime {
namespace {

using c10::CachingAllocator::StatType;

struct Block {
  c10::DeviceIndex device;
  size_t size;       // rounded size, what the block reserves
  size_t requested;  // bytes asked for
  bool allocated;
  bool dry = false;  // a dry run's block: an address, no memory behind it
  std::shared_ptr<c10::GatheredContext> context;  // of its allocation (memory history)
};

// The address space of dry-run blocks (runtime/Mode.h, dry_run()): one reservation of virtual
// addresses that no host memory backs (MAP_NORESERVE; a page would be committed only if
// something wrote to it, and nothing does: dry-run ops never touch device memory). Addresses are
// handed out in order and reused by size once released. Caller holds the allocator's mutex.
struct DryAddresses {
  static constexpr size_t kSpan = size_t(1) << 46;  // 64 TiB of addresses
  char* base = nullptr;
  size_t used = 0;
  std::unordered_map<size_t, std::vector<void*>> released;

  void* take(size_t size) {
    if (auto it = released.find(size); it != released.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    if (base == nullptr) {
      void* m = mmap(nullptr, kSpan, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      TORCH_CHECK(m != MAP_FAILED, "torchtpu dry run: could not reserve ", kSpan >> 30,
                  " GiB of address space for device tensors (mmap failed)");
      base = static_cast<char*>(m);
    }
    TORCH_CHECK(used + size <= kSpan, "torchtpu dry run: more than ", kSpan >> 30,
                " GiB of device tensors were allocated in dry runs");
    void* p = base + used;
    used += size;
    return p;
  }
  void give_back(void* p, size_t size) {
    madvise(p, size, MADV_DONTNEED);  // (drops a page that was touched after all)
    released[size].push_back(p);
  }
  bool owns(const void* p) const {
    return base != nullptr && p >= base && p < base + kSpan;
  }
};

struct DeviceState {
  // Free blocks by rounded size (a request takes a block of its exact size class): lists that
  // keep their capacity, so a steady state of allocations and frees allocates no host memory.
  // Dry-run blocks are cached apart (a dry run never gets memory with values, a real tensor
  // never gets a dry address).
  std::unordered_map<size_t, std::vector<void*>> cached, dry_cached;
  size_t cached_blocks = 0;
  Allocator::DeviceStats stats;
  size_t reserved = 0;
  size_t allocated = 0;
};

// All state behind one mutex. Leaked on purpose: tensors may be freed during static destruction.
struct State {
  std::recursive_mutex mutex;
  std::unordered_map<void*, Block> blocks;  // every block, allocated or cached
  std::map<uintptr_t, void*> by_address;    // for device_of() on interior pointers
  std::vector<DeviceState> devices;
  DryAddresses dry;
  // Memory history (record_memory_history): the last events per device.
  std::atomic<ContextGatherer> gatherer{nullptr};
  size_t max_events = 0;
  std::vector<std::deque<MemoryEvent>> events;
};

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Appends an event of the memory history. Caller holds the mutex.
void note_event(State& s, c10::DeviceIndex device, bool alloc, void* ptr, size_t size,
                std::shared_ptr<c10::GatheredContext> context) {
  if (s.max_events == 0) return;
  if (s.events.size() < s.devices.size()) s.events.resize(s.devices.size());
  auto& list = s.events[device];
  list.push_back({alloc, reinterpret_cast<uintptr_t>(ptr), size, now_us(), std::move(context)});
  while (list.size() > s.max_events) list.pop_front();
}

// The context of an allocation or free, gathered before taking the mutex (a gatherer of Python
// frames may take the GIL).
std::shared_ptr<c10::GatheredContext> gather_context(State& s) {
  ContextGatherer g = s.gatherer.load(std::memory_order_acquire);
  return g != nullptr ? g() : nullptr;
}

State& state() {
  static auto* s = [] {
    auto* st = new State();
    st->devices.resize(std::max<int>(device_count(), 1));
    return st;
  }();
  return *s;
}

StatType pool_of(size_t rounded) {
  return rounded <= Allocator::kSmallLimit ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

void update(c10::CachingAllocator::StatArray& stat, StatType pool, int64_t delta) {
  for (auto type : {StatType::AGGREGATE, pool}) {
    auto& s = stat[static_cast<size_t>(type)];
    if (delta >= 0) s.increase(delta); else s.decrease(-delta);
  }
}

std::string format_bytes(size_t bytes) {
  char buffer[64];
  if (bytes >= (size_t(1) << 30)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", bytes / double(size_t(1) << 30));
  } else if (bytes >= (size_t(1) << 20)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f MiB", bytes / double(size_t(1) << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buffer, sizeof(buffer), "%.2f KiB", bytes / 1024.0);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%zu bytes", bytes);
  }
  return buffer;
}

// Releases every cached block of a device. Caller holds the mutex.
void release_cached(State& s, c10::DeviceIndex device) {
  auto& d = s.devices[device];
  for (auto* cache : {&d.cached, &d.dry_cached}) {
    for (auto& [size, ptrs] : *cache) {
      for (void* ptr : ptrs) {
        update(d.stats.reserved_bytes, pool_of(size), -int64_t(size));
        update(d.stats.segment, pool_of(size), -1);
        d.stats.num_device_free++;
        d.reserved -= size;
        s.blocks.erase(ptr);
        s.by_address.erase(reinterpret_cast<uintptr_t>(ptr));
        if (cache == &d.dry_cached) {
          s.dry.give_back(ptr, size);
        } else {
          std::free(ptr);
        }
      }
    }
    cache->clear();
  }
  d.cached_blocks = 0;
}

void delete_block(void* ptr) {
  if (ptr == nullptr) return;
  auto& s = state();
  auto context = gather_context(s);
  std::unique_lock<std::recursive_mutex> lock(s.mutex);
  auto it = s.blocks.find(ptr);
  TORCH_INTERNAL_ASSERT(it != s.blocks.end() && it->second.allocated,
                        "torchtpu allocator: freeing a pointer it does not own");
  Block& b = it->second;
  auto& d = s.devices[b.device];
  const size_t size = b.size;
  const c10::DeviceIndex device = b.device;
  auto pool = pool_of(b.size);
  update(d.stats.allocation, pool, -1);
  update(d.stats.active, pool, -1);
  update(d.stats.allocated_bytes, pool, -int64_t(b.size));
  update(d.stats.active_bytes, pool, -int64_t(b.size));
  update(d.stats.requested_bytes, pool, -int64_t(b.requested));
  d.allocated -= b.size;
  b.allocated = false;
  b.context.reset();
  note_event(s, b.device, false, ptr, b.size, std::move(context));
  (b.dry ? d.dry_cached : d.cached)[b.size].push_back(ptr);
  ++d.cached_blocks;
  const int64_t allocated = int64_t(d.allocated), reserved = int64_t(d.reserved);
  lock.unlock();
  // torch.profiler(profile_memory=True) sees the free (a no-op when it is not recording).
  c10::reportMemoryUsageToProfiler(ptr, -int64_t(size), allocated, reserved, tpu_device(device));
}

}  // namespace

size_t Allocator::round_size(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes <= kSmallLimit) return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

c10::DataPtr Allocator::allocate(size_t bytes) { return allocate_on(current_device(), bytes); }

c10::DataPtr Allocator::allocate_on(c10::DeviceIndex device, size_t bytes) {
  check_device_index(device);
  const c10::Device where = tpu_device(device);
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, where);

  const size_t rounded = round_size(bytes);
  const auto pool = pool_of(rounded);
  auto& s = state();
  auto context = gather_context(s);
  std::unique_lock<std::recursive_mutex> lock(s.mutex);
  auto& d = s.devices[device];
  const size_t capacity = static_cast<size_t>(hbm_capacity_bytes());
  const bool dry = dry_run();
  auto& cache = dry ? d.dry_cached : d.cached;
  // Memory for a block: host memory, or in a dry run an address only.
  auto fresh = [&]() -> void* { return dry ? s.dry.take(rounded) : std::aligned_alloc(64, rounded); };

  void* ptr = nullptr;
  auto cached = cache.find(rounded);
  if (cached != cache.end() && !cached->second.empty()) {
    ptr = cached->second.back();
    cached->second.pop_back();
    --d.cached_blocks;
  } else {
    // A request that does not fit first releases the cache, then waits for the work queued on
    // the device's streams: the tensors that queued work holds are freed once it has run (as
    // CUDA's caching allocator waits for the events of pending frees). Only then is it out of
    // memory. (A stream's worker cannot wait for its own queue: it fails at once.)
    // Other threads may queue more work between a wait and the retry, so the request waits
    // again as long as a wait found queued work to wait for (up to a bound), and fails only when
    // the device's queues were idle and it still does not fit.
    for (int attempt = 0; attempt < 64 && ptr == nullptr; ++attempt) {
      if (d.reserved + rounded > capacity && d.cached_blocks > 0) {
        d.stats.num_alloc_retries++;
        release_cached(s, device);
      }
      if (d.reserved + rounded <= capacity) {
        ptr = fresh();
        if (ptr == nullptr) break;  // the host itself is out of memory
      } else if (on_stream_worker()) {
        break;
      } else {
        TORCHTPU_COUNT("allocator.waits_for_queued_frees");
        lock.unlock();
        const bool waited = release_queued_memory(device);
        lock.lock();
        if (!waited) {
          // Nothing was queued: one last look (a release may have finished meanwhile).
          if (d.reserved + rounded > capacity && d.cached_blocks > 0) release_cached(s, device);
          if (d.reserved + rounded <= capacity) ptr = fresh();
          break;
        }
      }
    }
    if (ptr == nullptr) {
      d.stats.num_ooms++;
      TORCHTPU_COUNT("allocator.out_of_memory");
      const size_t free_bytes = capacity > d.reserved ? capacity - d.reserved : 0;
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "TPU out of memory. Tried to allocate ", format_bytes(bytes),
          format_bytes(rounded) != format_bytes(bytes)
              ? " (" + format_bytes(rounded) + " in the allocator's size classes)"
              : std::string(),
          ". TPU ", int(device), " (simulated ", current_chip().name,
          " HBM) has a total capacity of ", format_bytes(capacity), " of which ",
          format_bytes(free_bytes), " is free. Of the allocated memory ",
          format_bytes(d.allocated), " is allocated by PyTorch, and ",
          format_bytes(d.reserved - d.allocated),
          " is reserved by PyTorch but unallocated. Free tensors you no longer need, use smaller "
          "batches, or simulate a larger HBM with TORCHTPU_HBM_BYTES (or another chip with "
          "TORCHTPU_CHIP).",
          free_bytes >= rounded ? " (The host could not provide the memory.)" : "");
    }
    update(d.stats.reserved_bytes, pool, int64_t(rounded));
    update(d.stats.segment, pool, 1);
    d.stats.num_device_alloc++;
    d.reserved += rounded;
    s.by_address[reinterpret_cast<uintptr_t>(ptr)] = ptr;
  }
  note_event(s, device, true, ptr, rounded, context);
  s.blocks[ptr] = Block{device, rounded, bytes, true, dry, std::move(context)};
  update(d.stats.allocation, pool, 1);
  update(d.stats.active, pool, 1);
  update(d.stats.allocated_bytes, pool, int64_t(rounded));
  update(d.stats.active_bytes, pool, int64_t(rounded));
  update(d.stats.requested_bytes, pool, int64_t(bytes));
  d.allocated += rounded;
  const int64_t allocated = int64_t(d.allocated), reserved = int64_t(d.reserved);
  lock.unlock();
  c10::reportMemoryUsageToProfiler(ptr, int64_t(rounded), allocated, reserved, where);
  return c10::DataPtr(ptr, ptr, &delete_block, where);
}

c10::DeleterFnPtr Allocator::raw_deleter() const { return &delete_block; }

void Allocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

void Allocator::emptyCache(c10::MempoolId_t) {
  for (c10::DeviceIndex i = 0; i < device_count(); ++i) empty_cache(i);
}

void Allocator::empty_cache(c10::DeviceIndex device) {
  check_device_index(device);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  release_cached(s, device);
}

void Allocator::recordStream(const c10::DataPtr&, c10::Stream) {
  // Work queued on a stream (strict eager's kernels, fused eager's regions, a collective's host
  // view) holds the tensors it uses, so a block is freed, and cached for reuse, only once every
  // stream that uses it is done with it: what recording a stream asks for already holds.
}

size_t Allocator::allocated_bytes(c10::DeviceIndex device) {
  check_device_index(device);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto& bytes = s.devices[device].stats.allocated_bytes;
  return static_cast<size_t>(bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
}

Allocator::DeviceStats Allocator::getDeviceStats(c10::DeviceIndex device) {
  check_device_index(device);
  materialize_deferred_work(FlushReason::memory_statistics);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  return s.devices[device].stats;
}

void Allocator::resetAccumulatedStats(c10::DeviceIndex device) {
  check_device_index(device);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  auto& st = s.devices[device].stats;
  for (auto* array : {&st.allocation, &st.segment, &st.active, &st.inactive_split,
                      &st.allocated_bytes, &st.reserved_bytes, &st.active_bytes,
                      &st.inactive_split_bytes, &st.requested_bytes}) {
    for (auto& stat : *array) stat.reset_accumulated();
  }
  st.num_alloc_retries = 0;
  st.num_ooms = 0;
  st.num_device_alloc = 0;
  st.num_device_free = 0;
}

void Allocator::resetPeakStats(c10::DeviceIndex device) {
  check_device_index(device);
  materialize_deferred_work(FlushReason::memory_statistics);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  auto& st = s.devices[device].stats;
  for (auto* array : {&st.allocation, &st.segment, &st.active, &st.inactive_split,
                      &st.allocated_bytes, &st.reserved_bytes, &st.active_bytes,
                      &st.inactive_split_bytes, &st.requested_bytes}) {
    for (auto& stat : *array) stat.reset_peak();
  }
}

std::pair<size_t, size_t> Allocator::getMemoryInfo(c10::DeviceIndex device) {
  check_device_index(device);
  materialize_deferred_work(FlushReason::memory_statistics);
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const size_t capacity = static_cast<size_t>(hbm_capacity_bytes());
  const size_t reserved = s.devices[device].reserved;
  return {capacity > reserved ? capacity - reserved : 0, capacity};
}

c10::DeviceIndex Allocator::device_of(const void* ptr) const {
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.by_address.upper_bound(address);
  if (it == s.by_address.begin()) return -1;
  --it;
  const Block& b = s.blocks.at(it->second);
  if (address >= it->first + b.size) return -1;
  return b.device;
}

Allocator& allocator() {
  static Allocator instance;
  return instance;
}

// ---------------------------------------------------------------------------------------------
// Pinned host memory.
namespace {

struct PinnedState {
  std::mutex mutex;
  std::map<uintptr_t, size_t> blocks;
};

PinnedState& pinned_state() {
  static auto* s = new PinnedState();
  return *s;
}

// PyTorch's caching host allocator (ATen/core/CachingHostAllocator.h), as CUDA's pinned memory:
// freed blocks are cached by size and reused once the streams that used them (record_event) are
// done; statistics, empty_cache(). The memory itself is ordinary host memory, remembered so that
// is_pinned() can answer.
struct HostMemory final : public at::CachingHostAllocatorImpl<c10::Stream, c10::Event> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    *ptr = std::aligned_alloc(64, (std::max<size_t>(size, 1) + 63) / 64 * 64);
    TORCH_CHECK_WITH(OutOfMemoryError, *ptr != nullptr, "Could not allocate ", size,
                     " bytes of pinned host memory");
    auto& s = pinned_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.blocks[reinterpret_cast<uintptr_t>(*ptr)] = size;
  }
  void free_block(at::HostBlock<c10::Stream>* block) override {
    {
      auto& s = pinned_state();
      std::lock_guard<std::mutex> lock(s.mutex);
      s.blocks.erase(reinterpret_cast<uintptr_t>(block->ptr_));
    }
    std::free(block->ptr_);
  }
  void record_stream(std::optional<std::vector<c10::Event>>& events, c10::Stream stream) override {
    c10::Event event(c10::DeviceType::PrivateUse1);
    event.record(stream);
    events->push_back(std::move(event));
  }
  bool query_event(c10::Event& event) override { return event.query(); }
  c10::Stream get_current_stream() const override { return current_stream(current_device()); }
  bool stream_is_capturing(c10::Stream) const override { return false; }
};

DECLARE_HOST_ALLOCATOR(TpuHostAllocator, HostMemory, delete_host_memory, g_host_allocator)

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

c10::Allocator& pinned_allocator() { return g_host_allocator; }

void record_memory_history(ContextGatherer gatherer, size_t max_entries) {
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  s.gatherer.store(gatherer, std::memory_order_release);
  s.max_events = gatherer != nullptr ? max_entries : 0;
  if (gatherer == nullptr) s.events.clear();
}

MemorySnapshot memory_snapshot() {
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  MemorySnapshot out;
  out.blocks.resize(s.devices.size());
  out.events.resize(s.devices.size());
  for (const auto& [ptr, b] : s.blocks) {
    out.blocks[b.device].push_back({reinterpret_cast<uintptr_t>(ptr), b.size, b.requested,
                                    b.allocated, b.dry, b.context});
  }
  for (auto& list : out.blocks) {
    std::sort(list.begin(), list.end(),
              [](const MemoryBlock& a, const MemoryBlock& b) { return a.address < b.address; });
  }
  for (size_t d = 0; d < s.events.size() && d < out.events.size(); ++d) {
    out.events[d].assign(s.events[d].begin(), s.events[d].end());
  }
  return out;
}

bool is_dry_memory(const void* ptr) {
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  return s.dry.owns(ptr);
}

bool is_pinned_ptr(const void* ptr) {
  auto& s = pinned_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.blocks.upper_bound(address);
  if (it == s.blocks.begin()) return false;
  --it;
  return address < it->first + it->second;
}

// ---------------------------------------------------------------------------------------------
// Host allocations routed to device memory.
namespace {

thread_local c10::DeviceIndex tls_host_to_device = -1;
c10::DeleterFnPtr host_raw_deleter = nullptr;

bool owns_block(void* ptr) {
  auto& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  return s.blocks.count(ptr) != 0;
}

// raw_allocate / raw_deallocate pairs of the routing allocator can hold either kind of memory.
void routed_raw_delete(void* ptr) {
  if (ptr != nullptr && owns_block(ptr)) {
    delete_block(ptr);
  } else if (host_raw_deleter != nullptr) {
    host_raw_deleter(ptr);
  }
}

class RoutingCpuAllocator final : public c10::Allocator {
 public:
  explicit RoutingCpuAllocator(c10::Allocator* host) : host_(host) {}
  c10::DataPtr allocate(size_t bytes) override {
    if (tls_host_to_device < 0) return host_->allocate(bytes);
    c10::DataPtr block = allocator().allocate_on(tls_host_to_device, bytes);
    block.unsafe_set_device(c10::Device(c10::kCPU));
    return block;
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return host_->raw_deleter() != nullptr ? &routed_raw_delete : nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* host_;
};

void install_routing_allocator() {
  static const bool installed = [] {
    c10::Allocator* host = c10::GetCPUAllocator();
    host_raw_deleter = host->raw_deleter();
    static RoutingCpuAllocator routing(host);
    c10::SetCPUAllocator(&routing, /*priority=*/100);
    return true;
  }();
  (void)installed;
}

}  // namespace

HostAllocationsOnDevice::HostAllocationsOnDevice(c10::DeviceIndex device)
    : previous_(tls_host_to_device) {
  install_routing_allocator();
  tls_host_to_device = device;
}

HostAllocationsOnDevice::~HostAllocationsOnDevice() { tls_host_to_device = previous_; }

c10::DataPtr take_device_block(c10::DataPtr& data) {
  if (data.get_deleter() != &delete_block) return c10::DataPtr();
  auto& s = state();
  c10::DeviceIndex device;
  {
    std::lock_guard<std::recursive_mutex> lock(s.mutex);
    auto it = s.blocks.find(data.get_context());
    if (it == s.blocks.end()) return c10::DataPtr();
    device = it->second.device;
  }
  c10::DataPtr taken = std::move(data);
  taken.unsafe_set_device(tpu_device(device));
  return taken;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator());

}  // namespace torchtpu::runtime
