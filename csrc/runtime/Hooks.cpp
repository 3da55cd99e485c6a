// The PrivateUse1 hooks (generators, pointers, pinned memory, storage resize) and the generator.
#include "runtime/Allocator.h"
#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Stream.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace torchtpu::runtime {

// ---------------------------------------------------------------------------------------------
// Generator

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

}  // namespace

void GeneratorImpl::set_current_seed(uint64_t seed) {
  CPUGeneratorImpl::set_current_seed(seed);
  anchor_ = at::mt19937(seed);
  anchor_offset_ = 0;
  anchor_bounded_ = false;
}

void GeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  CPUGeneratorImpl::set_state(new_state);
  anchor_ = at::mt19937(current_seed());
  anchor_offset_ = 0;
  anchor_bounded_ = true;
}

uint64_t GeneratorImpl::get_offset() const {
  const auto current = const_cast<GeneratorImpl*>(this)->engine().data();
  at::mt19937 walker = anchor_;
  uint64_t blocks = blocks_at(anchor_offset_);
  for (uint64_t replayed = 0;; ++replayed) {
    const auto data = walker.data();
    if (data.state_ == current.state_ && (blocks > 0 || current.next_ == 0)) break;
    TORCH_CHECK(!anchor_bounded_ || replayed < kSetStateReplayBlocks,
                "tpu generator: the state given to set_state is not within ",
                kSetStateReplayBlocks * kBlock, " words of its seed ", current_seed(),
                ", so its offset is not known. set_offset() or manual_seed() give it one.");
    update_block(walker);
    ++blocks;
  }
  const uint64_t offset = blocks == 0 ? 0 : (blocks - 1) * kBlock + current.next_;
  anchor_ = const_cast<GeneratorImpl*>(this)->engine();
  anchor_offset_ = offset;
  anchor_bounded_ = false;
  return offset;
}

void GeneratorImpl::set_offset(uint64_t offset) {
  // From the anchor when it is not past the offset and its lineage is known, else from the seed.
  at::mt19937 walker = anchor_;
  uint64_t blocks = blocks_at(anchor_offset_);
  if (anchor_bounded_ || anchor_offset_ > offset) {
    walker = at::mt19937(current_seed());
    blocks = 0;
  }
  for (const uint64_t target = blocks_at(offset); blocks < target; ++blocks) update_block(walker);
  auto data = walker.data();
  data.next_ = offset == 0 ? 0 : static_cast<uint32_t>((offset - 1) % kBlock + 1);
  data.left_ = offset == 0 ? 1 : static_cast<int>(kBlock + 1 - data.next_);
  walker.set_data(data);
  set_engine(walker);
  set_next_float_normal_sample(std::nullopt);
  set_next_double_normal_sample(std::nullopt);
  anchor_ = walker;
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
