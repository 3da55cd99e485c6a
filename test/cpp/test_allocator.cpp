// The simulated HBM allocator: stats, caching, out-of-memory and recovery.
// Run with TORCHTPU_HBM_BYTES=64 MiB (see CMakeLists.txt).
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using torchtpu::runtime::Allocator;
using torchtpu::runtime::allocator;
using StatType = c10::CachingAllocator::StatType;

namespace {

constexpr size_t MiB = size_t(1) << 20;

int64_t allocated(int device) {
  return allocator().getDeviceStats(device).allocated_bytes[size_t(StatType::AGGREGATE)].current;
}
int64_t reserved(int device) {
  return allocator().getDeviceStats(device).reserved_bytes[size_t(StatType::AGGREGATE)].current;
}
int64_t peak_allocated(int device) {
  return allocator().getDeviceStats(device).allocated_bytes[size_t(StatType::AGGREGATE)].peak;
}

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    allocator().emptyCache();
    for (int d = 0; d < 2; ++d) {
      ASSERT_EQ(allocated(d), 0) << "a previous test leaked device memory";
      allocator().resetPeakStats(d);
      allocator().resetAccumulatedStats(d);
    }
  }
};

TEST_F(AllocatorTest, CapacityComesFromTheEnvironment) {
  EXPECT_EQ(torchtpu::runtime::hbm_capacity_bytes(), 64 * int64_t(MiB));
  auto [free_bytes, total] = allocator().getMemoryInfo(0);
  EXPECT_EQ(total, 64 * MiB);
  EXPECT_EQ(free_bytes, 64 * MiB);
}

TEST_F(AllocatorTest, RoundsToSizeClasses) {
  EXPECT_EQ(Allocator::round_size(1), 512u);
  EXPECT_EQ(Allocator::round_size(512), 512u);
  EXPECT_EQ(Allocator::round_size(513), 1024u);
  EXPECT_EQ(Allocator::round_size(MiB), MiB);
  EXPECT_EQ(Allocator::round_size(MiB + 1), 2 * MiB);
  EXPECT_EQ(Allocator::round_size(3 * MiB), 4 * MiB);
}

TEST_F(AllocatorTest, StatsTrackAllocationsAndPeaks) {
  {
    auto a = allocator().allocate_on(0, 1000);
    auto b = allocator().allocate_on(0, 3 * MiB);
    EXPECT_EQ(a.device(), c10::Device(c10::DeviceType::PrivateUse1, 0));
    EXPECT_EQ(allocated(0), 1024 + 4 * int64_t(MiB));
    EXPECT_EQ(reserved(0), allocated(0));
    auto stats = allocator().getDeviceStats(0);
    EXPECT_EQ(stats.allocation[size_t(StatType::AGGREGATE)].current, 2);
    EXPECT_EQ(stats.allocation[size_t(StatType::SMALL_POOL)].current, 1);
    EXPECT_EQ(stats.allocation[size_t(StatType::LARGE_POOL)].current, 1);
    EXPECT_EQ(stats.requested_bytes[size_t(StatType::AGGREGATE)].current,
              1000 + 3 * int64_t(MiB));
    EXPECT_EQ(allocated(1), 0) << "device 1 must not see device 0's memory";
  }
  EXPECT_EQ(allocated(0), 0);
  EXPECT_EQ(peak_allocated(0), 1024 + 4 * int64_t(MiB));
  EXPECT_EQ(reserved(0), 1024 + 4 * int64_t(MiB)) << "freed blocks stay cached";
  allocator().resetPeakStats(0);
  EXPECT_EQ(peak_allocated(0), 0);
}

TEST_F(AllocatorTest, ReusesCachedBlocksOfTheSameSizeClass) {
  void* first = nullptr;
  {
    auto a = allocator().allocate_on(0, 4000);
    first = a.get();
  }
  auto b = allocator().allocate_on(0, 4090);  // same 4096-byte class
  EXPECT_EQ(b.get(), first);
  auto stats = allocator().getDeviceStats(0);
  EXPECT_EQ(stats.num_device_alloc, 1);
  EXPECT_EQ(stats.segment[size_t(StatType::AGGREGATE)].current, 1);
}

TEST_F(AllocatorTest, EmptyCacheReleasesOnlyFreeBlocks) {
  auto live = allocator().allocate_on(0, 2 * MiB);
  { auto dead = allocator().allocate_on(0, 8 * MiB); }
  EXPECT_EQ(reserved(0), 10 * int64_t(MiB));
  allocator().emptyCache();
  EXPECT_EQ(reserved(0), 2 * int64_t(MiB));
  EXPECT_EQ(allocated(0), 2 * int64_t(MiB));
}

TEST_F(AllocatorTest, OutOfMemoryRaisesAndKeepsLiveBlocks) {
  auto live = allocator().allocate_on(0, 40 * MiB);
  std::memset(live.get(), 0x5a, 40 * MiB);
  try {
    auto too_big = allocator().allocate_on(0, 30 * MiB);
    FAIL() << "expected an out-of-memory error";
  } catch (const c10::OutOfMemoryError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("TPU out of memory. Tried to allocate 30.00 MiB"), std::string::npos)
        << message;
    EXPECT_NE(message.find("total capacity of 64.00 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("40.00 MiB is allocated by PyTorch"), std::string::npos) << message;
  }
  EXPECT_EQ(allocator().getDeviceStats(0).num_ooms, 1);
  // Nothing already allocated was touched.
  EXPECT_EQ(allocated(0), 40 * int64_t(MiB));
  auto* bytes = static_cast<unsigned char*>(live.get());
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[40 * MiB - 1], 0x5a);
  // Later allocations that fit succeed.
  auto fits = allocator().allocate_on(0, 20 * MiB);
  EXPECT_NE(fits.get(), nullptr);
}

TEST_F(AllocatorTest, OutOfMemoryFirstReleasesTheCache) {
  { auto a = allocator().allocate_on(0, 40 * MiB); }
  EXPECT_EQ(reserved(0), 40 * int64_t(MiB));
  auto b = allocator().allocate_on(0, 50 * MiB);  // fits only once the cache is released
  EXPECT_EQ(reserved(0), 50 * int64_t(MiB));
  EXPECT_EQ(allocator().getDeviceStats(0).num_alloc_retries, 1);
}

// Memory that only queued work holds is freed once that work has run: a request that does not
// fit waits for the device's streams before it fails (regression: strict eager raised a false
// out of memory when the host queued work faster than the device ran it).
TEST_F(AllocatorTest, WaitsForQueuedWorkBeforeRunningOutOfMemory) {
  auto& queue = torchtpu::runtime::queue_of(torchtpu::runtime::new_stream(0, 0));
  std::atomic<bool> go{false};
  for (int i = 0; i < 3; ++i) {
    auto block = std::make_shared<c10::DataPtr>(allocator().allocate_on(0, 20 * MiB));
    queue.enqueue([block, &go] {
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }, "holds 20 MiB");
  }
  EXPECT_EQ(allocated(0), 60 * int64_t(MiB));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go = true;
  });
  auto fits_once_the_queue_ran = allocator().allocate_on(0, 30 * MiB);
  release.join();
  EXPECT_NE(fits_once_the_queue_ran.get(), nullptr);
  EXPECT_EQ(allocator().getDeviceStats(0).num_ooms, 0);
  EXPECT_EQ(allocated(0), 30 * int64_t(MiB));
}

TEST_F(AllocatorTest, TheMessageNamesTheRoundedSize) {
  auto live = allocator().allocate_on(0, 48 * MiB);
  try {
    auto too_big = allocator().allocate_on(0, 16 * MiB + 1);
    FAIL() << "expected an out-of-memory error";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("Tried to allocate 16.00 MiB (18.00 MiB in the "
                                         "allocator's size classes). TPU 0"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(AllocatorTest, EachDeviceHasItsOwnCapacity) {
  auto a = allocator().allocate_on(0, 60 * MiB);
  auto b = allocator().allocate_on(1, 60 * MiB);
  EXPECT_EQ(b.device().index(), 1);
  EXPECT_THROW(allocator().allocate_on(1, 10 * MiB), c10::OutOfMemoryError);
}

TEST_F(AllocatorTest, DeviceOfPointer) {
  auto a = allocator().allocate_on(1, 4096);
  EXPECT_EQ(allocator().device_of(a.get()), 1);
  EXPECT_EQ(allocator().device_of(static_cast<char*>(a.get()) + 100), 1);
  int on_stack = 0;
  EXPECT_EQ(allocator().device_of(&on_stack), -1);
}

TEST_F(AllocatorTest, InvalidDeviceIsAClearError) {
  try {
    allocator().allocate_on(5, 16);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Invalid device index tpu:5"), std::string::npos);
  }
}

TEST_F(AllocatorTest, ZeroBytesNeedsNoMemory) {
  auto a = allocator().allocate_on(0, 0);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(allocated(0), 0);
}

}  // namespace
