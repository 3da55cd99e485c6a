// Pending storages (Recording.h): storages without memory until the region that writes them
// runs. Their tensors hold a token that marks the record dead when the last of them goes; their
// bytes are counted per device, for memory pressure; c10's storage materializer gives one memory
// when a Python caller asks for it.
#include "aten/Entry.h"
#include "defer/Defer.h"
#include "defer/Recording.h"
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"

#include <c10/core/StorageImpl.h>

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>

namespace torchtpu::defer {
namespace {

using runtime::FlushReason;

struct Token {
  std::shared_ptr<PendingStorage> record;
};

// Bytes of the pending storages that tensors still refer to, per device (rounded as the
// allocator will round them): what the device will need when they run, on top of its
// allocated bytes. Checked against the HBM capacity as ops are recorded (memory_pressure).
constexpr size_t kMaxDevices = 64;
std::array<std::atomic<int64_t>, kMaxDevices> g_pending_bytes{};

void count_pending(PendingStorage& record) {
  const auto index = static_cast<size_t>(record.device.index());
  TORCH_INTERNAL_ASSERT(index < kMaxDevices);
  record.counted.store(true);
  g_pending_bytes[index] += static_cast<int64_t>(runtime::Allocator::round_size(record.nbytes));
}

void uncount_pending(PendingStorage& record) {
  if (!record.counted.exchange(false)) return;
  g_pending_bytes[static_cast<size_t>(record.device.index())] -=
      static_cast<int64_t>(runtime::Allocator::round_size(record.nbytes));
}

// The data pointer of a pending storage: one page of address space that is never readable or
// writable, so that the storage is not taken for a null ("invalid") one, and a read that
// bypasses the materializer below fails loudly instead of seeing stale memory.
void* pending_address() {
  static void* page = [] {
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TORCH_INTERNAL_ASSERT(p != MAP_FAILED, "fused eager: could not reserve the pending page");
    return p;
  }();
  return page;
}

void token_deleter(void* ctx) {
  auto* token = static_cast<Token*>(ctx);
  if (!token->record->materialized.load()) {
    token->record->dead.store(true);
    uncount_pending(*token->record);
  }
  delete token;
}

}  // namespace

void prune_registry(State& s) {
  for (auto it = s.registry.begin(); it != s.registry.end();) {
    if (it->second->dead.load() || it->second->materialized.load()) {
      it = s.registry.erase(it);
    } else {
      ++it;
    }
  }
}

// c10's storage materializer (c10/core/StorageMaterializer.h), installed on every pending
// storage: a Python caller that asks for its memory (tensor.data_ptr(),
// untyped_storage().data_ptr(), torch.save, copy.deepcopy, a C++ extension called from Python)
// first runs the recorded work that the graph holds and gives the storage memory; counted as the
// materialization "storage access" with its Python line. Ops ask for the data pointers of their
// operands too (TensorIterator) without the GIL and without reading them: those accesses leave
// the storage pending, and the materializer, which c10 clears after each call, is installed
// again when the op is recorded (make_operand).
void materialize_on_access(c10::StorageImpl* impl) {
  const c10::DataPtr& data = impl->_mutable_data_ptr_no_checks();
  if (data.get_deleter() != &token_deleter) return;
  if (aten::inside_kernel() || !runtime::thread_holds_gil()) return;
  std::shared_ptr<PendingStorage> record = static_cast<Token*>(data.get_context())->record;
  State& s = state();
  const std::string location = current_location();  // (before the lock: it takes the GIL)
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    if (s.local_pending.count(record->id) > 0) {
      note_materialization(FlushReason::storage_access, {}, location);
      flush_locked(s, FlushReason::storage_access);
    }
  }
  materialize(*record);
}

at::Tensor make_pending_tensor(c10::Device device, c10::IntArrayRef sizes,
                               c10::IntArrayRef strides, c10::ScalarType dtype, size_t nbytes) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      make_pending_storage(device, nbytes).second,
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return t;
}

namespace {

// True when `bytes` more on `device` would not fit next to what is allocated and what the
// live pending storages will need. Then everything pending is given memory now (counted as
// "memory pressure") and the op runs at once, as in strict eager: if its result does not fit,
// out of memory is raised at the op that asked for the memory, with the allocator's message,
// and nothing recorded is lost.
// The same for the host, whose memory backs every simulated HBM: when the pending storages of
// all devices and `bytes` more come near what the host has, the memory is taken now, so that a
// host out of memory is raised at the op too, not later at a synchronization.
bool host_memory_pressure(size_t bytes) {
  static const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                                  static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  int64_t pending = static_cast<int64_t>(bytes);
  for (int d = 0; d < runtime::device_count() && d < static_cast<int>(kMaxDevices); ++d) {
    pending += g_pending_bytes[d].load(std::memory_order_relaxed);
  }
  if (pending < physical / 4) return false;  // (cheap: only large requests read /proc/meminfo)
  int64_t available = physical;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) {
        available = static_cast<int64_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  return pending > available;
}

}  // namespace

bool memory_pressure(c10::Device device, size_t bytes) {
  const auto index = static_cast<size_t>(device.index());
  const int64_t needed = g_pending_bytes[index].load(std::memory_order_relaxed) +
                         static_cast<int64_t>(runtime::Allocator::round_size(bytes)) +
                         static_cast<int64_t>(runtime::allocator().allocated_bytes(device.index()));
  if (needed <= runtime::hbm_capacity_bytes() && !host_memory_pressure(bytes)) return false;
  TORCHTPU_COUNT("defer.memory_pressure");
  materialize_all(FlushReason::memory_pressure);
  return true;
}

std::pair<std::shared_ptr<PendingStorage>, c10::Storage> make_pending_storage(c10::Device device,
                                                                          size_t nbytes) {
  State& s = state();
  auto record = std::make_shared<PendingStorage>();
  record->device = device;
  record->nbytes = nbytes;
  c10::DataPtr data(pending_address(), new Token{record}, &token_deleter, device);
  auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                    std::move(data), &runtime::allocator(),
                                                    /*resizable=*/true);
  impl->set_materializer(&materialize_on_access);
  record->impl.emplace(impl);
  count_pending(*record);
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    record->id = s.next_id++;
    if (s.registry.size() > 4096) prune_registry(s);
    s.registry.emplace(record->id, record);
    s.any_pending.store(true);
  }
  return {std::move(record), c10::Storage(std::move(impl))};
}

std::shared_ptr<PendingStorage> pending_of(const c10::Storage& storage) {
  if (!storage) return nullptr;
  const c10::DataPtr& data = storage.data_ptr();
  if (data.get_deleter() != &token_deleter) return nullptr;
  return static_cast<Token*>(data.get_context())->record;
}

bool is_pending(const c10::Storage& storage) { return pending_of(storage) != nullptr; }

bool materialize(PendingStorage& record) {
  if (record.materialized.load()) return true;
  if (record.dead.load()) return false;
  // (Under the graph's lock: two threads must not give one storage two blocks.)
  auto lock = runtime::lock_without_gil(state().mutex);
  c10::intrusive_ptr<c10::StorageImpl> impl = record.impl->lock();
  if (!impl) return false;
  if (impl->data_ptr().get_deleter() != &token_deleter) return true;
  give_memory(record, *impl,
              runtime::allocator().allocate_on(record.device.index(), impl->nbytes()));
  return true;
}

void give_memory(PendingStorage& record, c10::StorageImpl& impl, c10::DataPtr memory) {
  record.materialized.store(true);
  uncount_pending(record);
  impl.set_data_ptr_noswap(std::move(memory));  // the token goes; the record stays alive
  impl.clear_materializer();
}

}  // namespace torchtpu::defer
