#pragma once
// The simulated TPU devices of this process: how many there are and which is current.
#include <c10/core/Device.h>

#include <cstdint>

namespace torchtpu::runtime {

// The simulated host has TORCHTPU_NUM_DEVICES chips, default 4 (a single-host v5e slice,
// v5litepod-4, has four chips). TPU_VISIBLE_CHIPS (a comma-separated list of those chips, as
// libtpu reads it) restricts the process to some of them, numbered from 0 in the list's order,
// as CUDA_VISIBLE_DEVICES does. device_count() is the number this process sees. Read once.
// Never throws: a bad value logs and gives 0.
c10::DeviceIndex device_count() noexcept;

// The host's chip behind a device index of this process (the index itself without
// TPU_VISIBLE_CHIPS).
int64_t physical_chip(c10::DeviceIndex index);

// Raises a clear error for an index outside [0, device_count()).
void check_device_index(c10::DeviceIndex index);

// The calling thread's current device (initially 0).
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
// Sets the current device and returns the previous one.
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// Simulated HBM capacity of each device: the chip's HBM, or TORCHTPU_HBM_BYTES.
int64_t hbm_capacity_bytes();

inline c10::Device tpu_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace torchtpu::runtime
