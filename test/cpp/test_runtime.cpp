// Devices, the guard, the chip table, the generator and tensors on the device through ATen.
#include "runtime/ChipSpec.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <gtest/gtest.h>
#include <torchtpu/torchtpu.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace torchtpu::runtime;

namespace {

const c10::Device tpu0(c10::DeviceType::PrivateUse1, 0);
const c10::Device tpu1(c10::DeviceType::PrivateUse1, 1);

TEST(Devices, CountAndName) {
  EXPECT_EQ(torchtpu::init(), 2);
  EXPECT_EQ(device_count(), 2);
  EXPECT_EQ(c10::get_privateuse1_backend(), "tpu");
  EXPECT_EQ(c10::Device("tpu:1"), tpu1);
}

TEST(Devices, GuardSetsAndRestoresTheCurrentDevice) {
  EXPECT_EQ(current_device(), 0);
  {
    c10::DeviceGuard guard(tpu1);
    EXPECT_EQ(current_device(), 1);
    std::thread([] { EXPECT_EQ(current_device(), 0); }).join();
  }
  EXPECT_EQ(current_device(), 0);
  EXPECT_THROW(set_device(7), c10::Error);
  EXPECT_THROW(set_device(-1), c10::Error);
}

TEST(Chips, TableHasEveryGenerationAndV5eByDefault) {
  EXPECT_EQ(all_chips().size(), 5u);
  EXPECT_EQ(current_chip().name, "v5e");
  EXPECT_EQ(chip_by_name("v6e").mxu_dim, 256);
  EXPECT_EQ(chip_by_name("v5e").hbm_bytes, int64_t(16) << 30);
  EXPECT_DOUBLE_EQ(chip_by_name("v5e").bf16_flops, 197e12);
  EXPECT_THROW(chip_by_name("v99"), c10::Error);
}

TEST(Generator, SameSeedSameNumbersAsTheCpu) {
  auto gen = default_generator(0);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(1234);
  }
  auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  auto on_tpu = at::empty({64}, at::TensorOptions().device(tpu0)).normal_(0, 1, gen);
  auto on_cpu = at::empty({64}).normal_(0, 1, cpu_gen);
  EXPECT_TRUE(at::equal(on_tpu.cpu(), on_cpu));
  // The device generator's state advanced: the next draw differs.
  auto again = at::empty({64}, at::TensorOptions().device(tpu0)).normal_(0, 1, gen);
  EXPECT_FALSE(at::equal(again.cpu(), on_tpu.cpu()));
}

TEST(Generator, StateRoundTrips) {
  auto gen = new_generator(1);
  EXPECT_EQ(gen.device(), tpu1);
  gen.set_current_seed(7);
  auto state = gen.get_state();
  auto a = at::empty({16}, at::TensorOptions().device(tpu1)).uniform_(0, 1, gen).cpu();
  gen.set_state(state);
  auto b = at::empty({16}, at::TensorOptions().device(tpu1)).uniform_(0, 1, gen).cpu();
  EXPECT_TRUE(at::equal(a, b));
}

TEST(Tensors, FactoriesCopiesAndFallbackOps) {
  auto a = at::arange(12, at::TensorOptions().device(tpu0).dtype(at::kFloat)).view({3, 4});
  EXPECT_EQ(a.device(), tpu0);
  // mul/add on the VPU, the cross product in the fallback
  auto b = at::linalg_cross(a.t().contiguous() * 2 + 1, a.t().contiguous());
  const auto host = at::arange(12, at::kFloat).view({3, 4}).t().contiguous();
  auto expected = at::linalg_cross(host * 2 + 1, host);
  EXPECT_TRUE(at::equal(b.cpu(), expected));
  EXPECT_GE(torchtpu::native_op_counts()["aten::mul.out"], 1);
  EXPECT_GE(torchtpu::fallback_counts()["aten::linalg_cross.out"], 1);
  auto on1 = b.to(tpu1);
  EXPECT_EQ(on1.device(), tpu1);
  EXPECT_TRUE(at::equal(on1.cpu(), expected));
  EXPECT_EQ(at::zeros({2, 2}, at::TensorOptions().device(tpu1)).sum().item<float>(), 0.0f);
}

TEST(Tensors, MixingDevicesIsAnError) {
  auto a = at::ones({4}, at::TensorOptions().device(tpu0));
  auto b = at::ones({4}, at::TensorOptions().device(tpu1));
  try {
    (void)(a + b);
    FAIL() << "expected a device mismatch error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Expected all tensors to be on the same device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)(a + at::ones({4})), c10::Error);
  // A 0-dim CPU tensor acts as a scalar.
  EXPECT_TRUE(at::equal((a + at::scalar_tensor(2.0)).cpu(), at::full({4}, 3.0f)));
}

}  // namespace

namespace {

TEST(StrictEager, OpsAreEnqueuedAndTheHostReturnsAtOnce) {
  ASSERT_EQ(std::string(torchtpu::runtime::name(torchtpu::runtime::eager_mode())), "strict");
  auto a = at::ones({64, 64}, at::TensorOptions().device(tpu0));
  torchtpu::synchronize(0);
  auto& queue = torchtpu::runtime::queue_of(torchtpu::runtime::current_stream(0));
  std::atomic<bool> release{false};
  queue.enqueue([&] { while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1)); },
                "hold");
  auto c = at::mm(a, a).add_(1);  // returns although the stream is held
  EXPECT_FALSE(queue.query());
  release = true;
  EXPECT_EQ(c.sum().item<float>(), 64.0f * 64 * 65);  // the host read waits for the stream
  EXPECT_TRUE(queue.query());
}

}  // namespace
