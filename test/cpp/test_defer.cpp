// Fused eager (DeferAndFuse) from C++: recording, a fused region, memory of intermediates.
#include "defer/Defer.h"
#include "runtime/Metrics.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torchtpu/torchtpu.h>

namespace {

const c10::Device tpu0(c10::DeviceType::PrivateUse1, 0);

struct FusedScope {
  FusedScope() { torchtpu::set_eager_mode("fused"); }
  ~FusedScope() { torchtpu::set_eager_mode("strict"); }
};

TEST(FusedEager, RecordsOpsAndRunsThemAsOneRegionAtAHostRead) {
  const auto x = at::randn({256, 256});
  const auto expected = ((x * 2 + 1).relu() - x).abs();
  FusedScope fused;
  const auto a = x.to(tpu0);
  torchtpu::synchronize(0);
  torchtpu::reset_metrics();
  const int64_t before = torchtpu::memory_allocated(0);
  auto y = ((a * 2 + 1).relu() - a).abs();
  EXPECT_EQ(torchtpu::defer::pending_ops(), 5);
  // (Reading memory statistics here would give the pending tensors memory first.)
  EXPECT_TRUE(at::equal(y.cpu(), expected));         // the host read runs the graph
  EXPECT_EQ(torchtpu::defer::pending_ops(), 0);
  auto c = torchtpu::counters();
  EXPECT_EQ(c["defer.fused_regions"], 1);
  EXPECT_EQ(c["defer.ops_fused"], 5);
  // Only the result took memory: the four intermediates lived in block buffers.
  EXPECT_EQ(torchtpu::memory_allocated(0) - before, 256 * 1024);
}

TEST(FusedEager, ScalarsAreRuntimeArgumentsOfACachedPlan) {
  FusedScope fused;
  const auto a = at::ones({64}, at::TensorOptions().device(tpu0));
  torchtpu::synchronize(0);
  torchtpu::defer::clear_cache();
  torchtpu::reset_metrics();
  for (int i = 1; i <= 3; ++i) {
    auto y = a * static_cast<double>(i) + 0.5;
    EXPECT_FLOAT_EQ(y.sum().item<float>(), 64.0f * (i + 0.5f));
  }
  auto c = torchtpu::counters();
  EXPECT_EQ(c["defer.compiles"], 1);  // the chain and its sum, planned once
  EXPECT_EQ(c["defer.cache_hits"], 2);
}

}  // namespace
