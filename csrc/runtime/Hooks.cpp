// The PrivateUse1 hooks (generators, pointers, pinned memory, storage resize) and the generator.
#include "runtime/Allocator.h"
#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Stream.h"

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <vector>

namespace torchtpu::runtime {

// ---------------------------------------------------------------------------------------------
// Generator (runtime/Generator.h; docs/runtime.md, "Random numbers")

GeneratorImpl::GeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : CPUGeneratorImpl(seed), anchor_(seed) {
  device_ = tpu_device(device);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

GeneratorImpl* GeneratorImpl::clone_impl() const {
  auto* copy = new GeneratorImpl(device_.index());
  copy->assign_from_host(host_copy());
  copy->anchor_ = anchor_;
  copy->anchor_offset_ = anchor_offset_;
  copy->anchor_bounded_ = anchor_bounded_;
  return copy;
}

namespace {

constexpr uint64_t kBlock = at::MERSENNE_STATE_N;  // words per block update of the engine
// How far get_offset replays from the seed to find a state given by set_state: 2^20 blocks,
// about 650 million words and one second.
constexpr uint64_t kSetStateReplayBlocks = uint64_t(1) << 20;

// Block updates done by an engine that drew `offset` words since its seed: the first draw
// updates the block, then every 624 words.
uint64_t blocks_at(uint64_t offset) { return offset == 0 ? 0 : (offset - 1) / kBlock + 1; }

// One block update, as the engine's next draw after its block is used up does it.
void update_block(at::mt19937& engine) {
  auto data = engine.data();
  data.left_ = 1;
  engine.set_data(data);
  engine();
}

// `engine`, `from` words after its seed, moved to `to` (>= from) words after it, as if the words
// in between were drawn.
at::mt19937 advance(at::mt19937 engine, uint64_t from, uint64_t to) {
  for (uint64_t blocks = blocks_at(from), target = blocks_at(to); blocks < target; ++blocks) {
    update_block(engine);
  }
  auto data = engine.data();
  data.next_ = to == 0 ? 0 : static_cast<uint32_t>((to - 1) % kBlock + 1);
  data.left_ = to == 0 ? 1 : static_cast<int>(kBlock + 1 - data.next_);
  engine.set_data(data);
  return engine;
}

// What a CPU generator's state holds besides its seed: the engine and the normal samples the
// Box-Muller transforms keep for the next draw.
struct Snapshot {
  at::mt19937 engine;
  std::optional<float> float_normal;
  std::optional<double> double_normal;
};

// The engines of the states handed out by get_state, keyed by (seed, offset), shared by every
// tpu generator (a state of one may be set into another: DTensor sets the default generator's
// state into a user's). A key names one engine whatever generator drew it; the normal samples
// are those of the last state handed out at that key. At most kCapacity snapshots (2.5 KB each),
// the least recently used dropped first.
class SnapshotCache {
 public:
  void put(uint64_t seed, uint64_t offset, Snapshot snapshot) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Key key{seed, offset};
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      it->second.snapshot = std::move(snapshot);
      lru_.splice(lru_.begin(), lru_, it->second.use);
      return;
    }
    lru_.push_front(key);
    entries_.emplace(key, Entry{std::move(snapshot), lru_.begin()});
    if (entries_.size() > kCapacity) {
      entries_.erase(lru_.back());
      lru_.pop_back();
    }
  }

  // The snapshot of `seed` at `offset`, or the nearest one before it, with its offset.
  std::optional<std::pair<uint64_t, Snapshot>> at_or_before(uint64_t seed, uint64_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.upper_bound(Key{seed, offset});
    if (it == entries_.begin()) return std::nullopt;
    --it;
    if (it->first.first != seed) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second.use);
    return std::make_pair(it->first.second, it->second.snapshot);
  }

  static constexpr size_t kCapacity = 1024;

 private:
  using Key = std::pair<uint64_t, uint64_t>;
  struct Entry {
    Snapshot snapshot;
    std::list<Key>::iterator use;
  };
  std::mutex mutex_;  // (held for a lookup or a copy: never while waiting for anything)
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // most recently used first
};

SnapshotCache& snapshots() {
  static auto* cache = new SnapshotCache();  // (never destroyed: generators outlive statics)
  return *cache;
}

}  // namespace

void GeneratorImpl::set_current_seed(uint64_t seed) {
  CPUGeneratorImpl::set_current_seed(seed);
  anchor_ = at::mt19937(seed);
  anchor_offset_ = 0;
  anchor_bounded_ = false;
}

c10::intrusive_ptr<c10::TensorImpl> GeneratorImpl::get_state() const {
  const auto offset = find_offset();
  // A state not drawn from its seed (a forged CPU-format state given to set_state) has no offset:
  // it is handed back in the CPU's format, which set_state takes too.
  if (!offset) return CPUGeneratorImpl::get_state();
  auto* self = const_cast<GeneratorImpl*>(this);
  const uint64_t seed = current_seed();
  snapshots().put(seed, *offset,
                  Snapshot{self->engine(), self->next_float_normal_sample(),
                           self->next_double_normal_sample()});
  auto state = at::detail::empty_cpu({kStateBytes}, c10::ScalarType::Byte, std::nullopt,
                                     std::nullopt, std::nullopt, std::nullopt);
  auto* bytes = static_cast<uint8_t*>(state.data_ptr());
  const auto signed_offset = static_cast<int64_t>(*offset);
  std::memcpy(bytes, &seed, sizeof(seed));
  std::memcpy(bytes + sizeof(seed), &signed_offset, sizeof(signed_offset));
  return state.getIntrusivePtr();
}

void GeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  if (new_state.numel() == kStateBytes && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>()) {
    TORCH_CHECK(new_state.device().is_cpu() && new_state.is_contiguous(),
                "tpu generator: the state must be a contiguous CPU tensor of bytes");
    const auto* bytes = static_cast<const uint8_t*>(new_state.data());
    uint64_t seed = 0;
    int64_t offset = 0;
    std::memcpy(&seed, bytes, sizeof(seed));
    std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
    TORCH_CHECK(offset >= 0, "tpu generator: the state's offset (bytes 8 to 15) is ", offset,
                ": an offset counts the 32-bit words drawn since the seed and cannot be negative");
    position(seed, static_cast<uint64_t>(offset), /*exact=*/true);
    return;
  }
  try {
    CPUGeneratorImpl::set_state(new_state);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "tpu generator: expected a state of ", kStateBytes,
                " bytes (seed and offset, as torch.tpu.get_rng_state() returns) or the CPU "
                "generator's state (torch.get_rng_state()): ", e.what_without_backtrace());
  }
  anchor_ = at::mt19937(current_seed());
  anchor_offset_ = 0;
  anchor_bounded_ = true;
}

std::optional<uint64_t> GeneratorImpl::find_offset() const {
  const auto current = const_cast<GeneratorImpl*>(this)->engine().data();
  at::mt19937 walker = anchor_;
  uint64_t blocks = blocks_at(anchor_offset_);
  for (uint64_t replayed = 0;; ++replayed) {
    const auto data = walker.data();
    if (data.state_ == current.state_ && (blocks > 0 || current.next_ == 0)) break;
    if (anchor_bounded_ && replayed >= kSetStateReplayBlocks) return std::nullopt;
    update_block(walker);
    ++blocks;
  }
  const uint64_t offset = blocks == 0 ? 0 : (blocks - 1) * kBlock + current.next_;
  anchor_ = const_cast<GeneratorImpl*>(this)->engine();
  anchor_offset_ = offset;
  anchor_bounded_ = false;
  return offset;
}

uint64_t GeneratorImpl::get_offset() const {
  const auto offset = find_offset();
  TORCH_CHECK(offset.has_value(), "tpu generator: the state given to set_state is not within ",
              kSetStateReplayBlocks * kBlock, " words of its seed ", current_seed(),
              ", so its offset is not known. set_offset() or manual_seed() give it one.");
  return *offset;
}

void GeneratorImpl::set_offset(uint64_t offset) {
  position(current_seed(), offset, /*exact=*/false);
}

void GeneratorImpl::position(uint64_t seed, uint64_t offset, bool exact) {
  // The nearest engine at or before the offset among: a snapshot of the seed, the anchor (when
  // its lineage is known), the seeded engine.
  at::mt19937 from(seed);
  uint64_t from_offset = 0;
  std::optional<float> float_normal;
  std::optional<double> double_normal;
  if (auto hit = snapshots().at_or_before(seed, offset)) {
    from = hit->second.engine;
    from_offset = hit->first;
    if (exact && from_offset == offset) {
      float_normal = hit->second.float_normal;
      double_normal = hit->second.double_normal;
    }
  }
  if (!anchor_bounded_ && anchor_.seed() == seed && anchor_offset_ <= offset &&
      anchor_offset_ > from_offset) {
    from = anchor_;
    from_offset = anchor_offset_;
  }
  at::mt19937 engine = advance(from, from_offset, offset);
  set_engine(engine);
  set_next_float_normal_sample(float_normal);
  set_next_double_normal_sample(double_normal);
  anchor_ = engine;
  anchor_offset_ = offset;
  anchor_bounded_ = false;
}

at::Generator GeneratorImpl::host_copy() const {
  auto* self = const_cast<GeneratorImpl*>(this);
  auto host = at::make_generator<at::CPUGeneratorImpl>(current_seed());
  auto* impl = host.get<at::CPUGeneratorImpl>();
  impl->set_engine(self->engine());
  impl->set_next_float_normal_sample(self->next_float_normal_sample());
  impl->set_next_double_normal_sample(self->next_double_normal_sample());
  return host;
}

void GeneratorImpl::assign_from_host(const at::Generator& host) {
  auto* impl = host.get<at::CPUGeneratorImpl>();
  set_engine(impl->engine());
  set_next_float_normal_sample(impl->next_float_normal_sample());
  set_next_double_normal_sample(impl->next_double_normal_sample());
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> gens;
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      gens.push_back(at::make_generator<GeneratorImpl>(i));
    }
    return gens;
  }();
  if (device < 0) device = current_device();
  check_device_index(device);
  return generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<GeneratorImpl>(device);
}

// ---------------------------------------------------------------------------------------------
// Hooks

namespace {

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return true; }
  void init() const override {}

  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    auto device = allocator().device_of(data);
    TORCH_CHECK(device >= 0, "The pointer ", data, " was not allocated on a TPU device");
    return tpu_device(device);
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const size_t old_bytes = impl->nbytes();
    c10::DeviceIndex device = storage.device().index();
    // Recorded and queued ops reach their operands' memory through the StorageImpl when they
    // run, so every op already issued runs first, against the old memory: fused eager's
    // pending graph is flushed and the device's streams drained (FSDP2 frees and re-grows its
    // unsharded parameters this way while the ops that read them are still pending; the
    // flush is counted as the materialization "storage resize"). docs/design.md 3.1.
    flush_deferred_work(FlushReason::storage_resize);
    synchronize_device(device);
    c10::DataPtr fresh = allocator().allocate_on(device, new_bytes);
    if (old_bytes > 0 && new_bytes > 0) {
      std::memcpy(fresh.get(), impl->data(), std::min(old_bytes, new_bytes));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

}  // namespace
}  // namespace torchtpu::runtime
