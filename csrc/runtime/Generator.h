#pragma once
// The device's random number generator: one default generator per device.
//
// It is a CPUGeneratorImpl (a Mersenne Twister with the same seeding and state format as
// PyTorch's CPU generator) that reports the TPU device. Kernels use it through host_copy() /
// assign_from_host(): the state is lent to a CPU generator for the duration of a kernel and
// written back, so a seed gives the same numbers on "tpu" as on the CPU.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace torchtpu::runtime {

class GeneratorImpl final : public at::CPUGeneratorImpl {
 public:
  explicit GeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // A CPU generator carrying this generator's state.
  at::Generator host_copy() const;
  // Takes the state back from a CPU generator made by host_copy().
  void assign_from_host(const at::Generator& host);

 private:
  GeneratorImpl* clone_impl() const override;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace torchtpu::runtime
