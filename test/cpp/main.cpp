// Test main: the runtime reads its configuration once, on first use, so it is set here before
// any test runs: a small HBM makes out-of-memory paths cheap to reach, and two devices exercise
// the guard and cross-device copies; work goes to the streams' workers (TORCHTPU_INLINE=0: the
// queue's own mechanics; the tests of work run by the issuing thread set their level
// themselves). Values already in the environment win.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("TORCHTPU_HBM_BYTES", "67108864", 0);
  setenv("TORCHTPU_NUM_DEVICES", "2", 0);
  setenv("TORCHTPU_INLINE", "0", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
