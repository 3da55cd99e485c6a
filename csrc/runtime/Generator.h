#pragma once
// The device's random number generator: one default generator per device.
//
// It is a CPUGeneratorImpl (a Mersenne Twister with the same seeding as PyTorch's CPU
// generator) that reports the TPU device. Kernels use it through host_copy() /
// assign_from_host(): the state is lent to a CPU generator for the duration of a kernel and
// written back, so a seed gives the same numbers on "tpu" as on the CPU.
//
// Its state (get_state / set_state) is CUDA's layout, 16 bytes: the seed (uint64) and the
// offset (int64), the number of 32-bit words drawn since the seed, as DTensor's
// OffsetBasedRNGTracker reads and moves it (docs/runtime.md, "The state: seed and offset").
// The engine behind a state is kept in a process-wide cache of snapshots, keyed by (seed,
// offset), taken when a state is handed out (with the cached normal samples): set_state of such
// a state is a copy; of any other (seed, offset), the engine of the nearest earlier snapshot of
// that seed (or of this generator's anchor, or the seeded engine) moved forward by discarding
// words. set_state also takes the CPU generator's own state format.
//
// Offsets: counting draws would cost every random kernel; instead the generator remembers one
// engine whose offset it knows (the seeded engine, or the one of the last get_state / get_offset
// / set_offset / set_state) and get_offset replays the Mersenne Twister's block updates from
// there until it meets the current state: its cost is that of the blocks drawn since the last
// query (about 0.3 us per 624 words: 5 ms after 10 million), nothing for kernels.
// docs/cuda-parity.md ("Generator offsets") and docs/runtime.md ("Random numbers") have the
// contract.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <optional>

namespace torchtpu::runtime {

class GeneratorImpl final : public at::CPUGeneratorImpl {
 public:
  explicit GeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // A CPU generator carrying this generator's state.
  at::Generator host_copy() const;
  // Takes the state back from a CPU generator made by host_copy().
  void assign_from_host(const at::Generator& host);

  void set_current_seed(uint64_t seed) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  uint64_t get_offset() const override;
  void set_offset(uint64_t offset) override;

  // The size of the state get_state returns: seed and offset, 8 bytes each.
  static constexpr int64_t kStateBytes = 16;

 private:
  GeneratorImpl* clone_impl() const override;
  // The offset of the current state, when it is known or found by the replay.
  std::optional<uint64_t> find_offset() const;
  // Puts the engine `offset` words after `seed`; with `exact`, a snapshot at exactly that point
  // brings back its cached normal samples too (otherwise they are dropped).
  void position(uint64_t seed, uint64_t offset, bool exact);

  // An engine of this generator's lineage and its offset. After set_state of a CPU-format state
  // the offset of the new state is not known: the seeded engine of its seed is the anchor, and a
  // state that a bounded replay does not reach (not drawn from that seed) has no offset.
  mutable at::mt19937 anchor_;
  mutable uint64_t anchor_offset_ = 0;
  mutable bool anchor_bounded_ = false;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace torchtpu::runtime
