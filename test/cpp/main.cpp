// Test main: the runtime reads its configuration once, on first use, so it is set here before
// any test runs: a small HBM makes out-of-memory paths cheap to reach, and two devices exercise
// the guard and cross-device copies. Values already in the environment win.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("TORCHTPU_HBM_BYTES", "67108864", 0);
  setenv("TORCHTPU_NUM_DEVICES", "2", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
