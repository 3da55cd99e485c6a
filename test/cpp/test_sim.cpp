// The simulated chip: bf16 numerics, the pass-by-pass MXU reference against the cycle-level
// systolic array, the fast executor against the reference (within the documented bound), and
// the cost model against the systolic cycle counts and hand-computed rooflines.
#include "runtime/ChipSpec.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"
#include "sim/Mxu.h"
#include "sim/Numerics.h"
#include "sim/OneDnnGemm.h"
#include "sim/Reference.h"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace torchtpu::sim;
namespace runtime = torchtpu::runtime;

namespace {

std::vector<float> random_values(std::mt19937& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Numerics, RoundBf16MatchesPyTorchsConversion) {
  std::mt19937 rng(0);
  auto values = random_values(rng, 100000, 1000.0f);
  const float special[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie */, 1.01171875f /* tie */,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::max(), 1e-40f /* subnormal */,
                           std::numeric_limits<float>::min()};
  values.insert(values.end(), std::begin(special), std::end(special));
  for (float x : values) {
    const float expected = static_cast<float>(c10::BFloat16(x));
    ASSERT_EQ(round_bf16(x), expected) << "x = " << x;
  }
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Numerics, ThreePartsSumExactly) {
  std::mt19937 rng(1);
  for (float x : random_values(rng, 100000, 10.0f)) {
    float hi, mid, lo;
    split_bf16(x, hi, mid, lo);
    ASSERT_EQ(round_bf16(hi), hi);
    ASSERT_EQ(round_bf16(mid), mid);
    ASSERT_EQ(round_bf16(lo), lo);
    ASSERT_EQ(hi + mid + lo, x);
    ASSERT_EQ((hi + mid) + lo, x);
    // hi is x's upper 16 bits (truncation), mid and lo are rounded to nearest
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits &= 0xffff0000u;
    float truncated;
    std::memcpy(&truncated, &bits, sizeof truncated);
    ASSERT_EQ(hi, truncated);
    ASSERT_EQ(mid, round_bf16(x - hi));
  }
  // Infinities keep their hi part; their mid and lo are NaN, which combine_passes drops.
  float hi, mid, lo;
  split_bf16(std::numeric_limits<float>::infinity(), hi, mid, lo);
  EXPECT_EQ(hi, std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(mid) && std::isnan(lo));
  EXPECT_TRUE(std::isnan(truncate_bf16(std::numeric_limits<float>::quiet_NaN())));
  uint32_t low_payload_nan_bits = 0x7f800001u;  // a NaN whose payload is in the low 16 bits
  float low_payload_nan;
  std::memcpy(&low_payload_nan, &low_payload_nan_bits, sizeof low_payload_nan);
  EXPECT_TRUE(std::isnan(truncate_bf16(low_payload_nan)));
  EXPECT_EQ(passes(Precision::kHighest), 6);
  EXPECT_EQ(passes(Precision::kHigh), 3);
  EXPECT_EQ(passes(Precision::kDefault), 1);
}

struct Shape {
  int64_t M, K, N;
  int S;
};

class SystolicVsReference : public ::testing::TestWithParam<int> {};

TEST_P(SystolicVsReference, BitExactOnRandomShapes) {
  const int S = GetParam();
  std::mt19937 rng(S);
  std::uniform_int_distribution<int64_t> dim(1, S <= 8 ? 3 * S + 2 : S + 40);
  const int trials = S <= 8 ? 40 : 4;
  for (int t = 0; t < trials; ++t) {
    const int64_t M = S <= 8 ? dim(rng) : std::uniform_int_distribution<int64_t>(1, 24)(rng);
    const int64_t K = dim(rng), N = dim(rng);
    const auto A = random_values(rng, M * K), B = random_values(rng, K * N);
    for (auto p : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
      std::vector<float> ref(M * N), sys(M * N);
      reference_matmul(A.data(), B.data(), ref.data(), M, K, N, S, p);
      systolic_matmul(A.data(), B.data(), sys.data(), M, K, N, S, p);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(sys[i], ref[i]) << "S=" << S << " M=" << M << " K=" << K << " N=" << N
                                  << " precision=" << name(p) << " element " << i;
      }
    }
  }
}

TEST_P(SystolicVsReference, TileCyclesMatchTheCostModel) {
  const int S = GetParam();
  std::mt19937 rng(100 + S);
  for (int t = 0; t < (S <= 8 ? 50 : 5); ++t) {
    const int64_t M = std::uniform_int_distribution<int64_t>(1, S <= 8 ? 40 : 30)(rng);
    const int64_t Kt = std::uniform_int_distribution<int64_t>(1, S)(rng);
    const int64_t Nt = std::uniform_int_distribution<int64_t>(1, S)(rng);
    const auto A = random_values(rng, M * Kt), W = random_values(rng, Kt * Nt);
    std::vector<float> out(M * Nt);
    const auto run = systolic_tile(A.data(), Kt, W.data(), Nt, nullptr, out.data(), Nt, M, Kt, Nt, S);
    ASSERT_EQ(run.cycles, CostModel::tile_cycles(M, Nt, S))
        << "S=" << S << " M=" << M << " Kt=" << Kt << " Nt=" << Nt;
  }
}

INSTANTIATE_TEST_SUITE_P(ArraySizes, SystolicVsReference, ::testing::Values(4, 8, 128, 256));

TEST(CostModel, OneFullTileOnOneMxuEqualsTheSystolicCount) {
  // A chip with one MXU: one S x S tile streaming M rows (a multiple of the sublane tile, >= S).
  torchtpu::runtime::ChipSpec one = torchtpu::runtime::chip_by_name("v5e");
  one.mxus_per_core = 1;
  one.tensor_cores = 1;
  one.bf16_flops = 2.0 * 128 * 128 * 1e9;  // 1 GHz
  const CostModel model(one);
  EXPECT_DOUBLE_EQ(model.mxu_cycles_per_s(), 1e9);
  for (int64_t M : {128, 256, 1000 * 8}) {
    EXPECT_EQ(model.mxu_cycles(1, M, 128, 128, 4), CostModel::tile_cycles(M, 128, 128));
  }
}

TEST(CostModel, MatmulRooflineOnV5e) {
  const CostModel model(torchtpu::runtime::chip_by_name("v5e"));
  EXPECT_NEAR(model.mxu_cycles_per_s(), 197e12 / (2.0 * 128 * 128 * 4), 1.0);
  EXPECT_DOUBLE_EQ(model.clock_hz(), 1.5e9);
  // The achieved rate: XLA's 8192^3 bf16 GEMM on a v5e, 181.8 of 197 TFLOP/s (ChipSpec.cpp).
  EXPECT_NEAR(model.mxu_efficiency(), 0.923, 0.0005);
  const int64_t n = 4096;
  const double bytes = 3 * CostModel::padded_bytes({n, n}, 2);
  const auto e = model.matmul(1, n, n, n, 1, 2, bytes);
  const double achieved_s = 2.0 * n * n * n / (197e12 * model.mxu_efficiency());  // 0.756 ms
  EXPECT_NEAR(e.mxu_s, achieved_s, 0.01 * achieved_s);
  EXPECT_GE(e.mxu_s, achieved_s);
  EXPECT_DOUBLE_EQ(e.peak_s, 2.0 * n * n * n / 197e12);  // 0.698 ms: the time at peak
  EXPECT_STREQ(e.bound(), "mxu");
  EXPECT_NEAR(e.seconds() * 1e3, 0.76, 0.01);
  // Six passes for float32 at "highest".
  EXPECT_NEAR(model.matmul(1, n, n, n, 6, 4, 0).mxu_s, 6 * achieved_s, 0.06 * achieved_s);
  // Padding: an 8 x 8 x 8 matmul occupies a whole 128 x 128 weight tile.
  const auto tiny = model.matmul(1, 8, 8, 8, 1, 4, 0);
  EXPECT_EQ(tiny.mxu_flops, 2.0 * 8 * 128 * 128);
  EXPECT_EQ(tiny.flops, 2.0 * 8 * 8 * 8);
}

// A large matmul runs at the chip's achieved rate (peak x the large-GEMM efficiency of its
// source: 8192^3 and 32768^3 bf16 GEMMs measured at 0.83-0.92 of peak), within the tile model's
// 2% of fill and drain.
TEST(CostModel, EveryChipReachesItsAchievedRateOnLargeMatmuls) {
  for (const auto& chip : torchtpu::runtime::all_chips()) {
    const CostModel model(chip);
    EXPECT_GT(chip.mxu_efficiency, 0.8) << chip.name;
    EXPECT_LT(chip.mxu_efficiency, 0.95) << chip.name;
    const int64_t n = 8192;
    const double peak_s = 2.0 * n * n * n / chip.bf16_flops;
    const double achieved_s = peak_s / chip.mxu_efficiency;
    const auto e = model.matmul(1, n, n, n, 1, 2, 0);
    EXPECT_NEAR(e.mxu_s, achieved_s, 0.02 * achieved_s) << chip.name;
    EXPECT_GE(e.mxu_s, achieved_s) << chip.name << ": never faster than the achieved rate";
    EXPECT_DOUBLE_EQ(e.peak_s, peak_s) << chip.name;
    // A small matmul is far from peak: padding to the MXU width and fill/drain cycles.
    const auto small = model.matmul(1, 8, 64, 64, 1, 2, 0);
    EXPECT_GT(small.mxu_s, 10 * 2.0 * 8 * 64 * 64 / chip.bf16_flops) << chip.name;
  }
}

// The clock of each chip (its source or assumption in runtime/ChipSpec.cpp) and the published
// peak agree: bf16 peak = 2 x MXUs x S^2 x multiply-adds per cell x clock, within 1% (the
// rounding of the published figures). With the derived clocks of before (peak / (2 S^2 MXUs))
// v6e and v7 ran at 3.5 and 4.4 GHz; their MXUs take two multiply-adds per cell (assumed).
TEST(ChipSpec, ClockAndMxuCountGiveThePublishedPeak) {
  for (const auto& chip : torchtpu::runtime::all_chips()) {
    const CostModel model(chip);
    EXPECT_NEAR(model.mxu_cycles_per_s() / (chip.clock_hz * chip.mxu_macs_per_cell), 1.0, 0.01)
        << chip.name;
    bool clock = false, alus = false, gemm = false, hbm = false;
    for (const auto& f : chip.facts) {
      EXPECT_FALSE(f.source.empty()) << chip.name << " " << f.figure;
      clock |= f.figure == "clock";
      alus |= f.figure == "VPU ALUs per lane";
      gemm |= f.figure == "large-GEMM efficiency";
      hbm |= f.figure == "HBM efficiency";
    }
    EXPECT_TRUE(clock && alus && gemm && hbm)
        << chip.name << ": every constant has a source or assumption";
  }
  EXPECT_DOUBLE_EQ(torchtpu::runtime::chip_by_name("v6e").clock_hz, 1.75e9);
  EXPECT_DOUBLE_EQ(torchtpu::runtime::chip_by_name("v7").clock_hz, 2.2e9);
}

// The VPU's rate is the published one: 8 x 128 lanes x 4 ALUs x clock x TensorCores (v5p: the
// scaling book's 1.4e13 FLOP/s; v6e and v7: tokamax's 7.168 and 9.0112 TFLOP/s per core).
TEST(CostModel, VpuRateIsThePublishedOne) {
  auto rate = [](const char* name) {
    const CostModel model(torchtpu::runtime::chip_by_name(name));
    return model.vpu_units_per_s() * 1024;
  };
  EXPECT_NEAR(rate("v5p"), 1.4e13, 0.05e13);  // (8 x 128 x 4 x 2 x 1.75e9 = 1.43e13, rounded)
  EXPECT_NEAR(rate("v6e"), 7.168e12, 1e9);
  EXPECT_NEAR(rate("v7"), 2 * 9.0112e12, 1e9);
  // One unit over a vreg on v6e: 1 / (1.75e9 x 4) s.
  const CostModel v6e(torchtpu::runtime::chip_by_name("v6e"));
  EXPECT_NEAR(v6e.vector(1024, 1.0, 0).vpu_s, 1.0 / (1.75e9 * 4), 1e-15);
}

// The time at peak is the dtype's: an int8 matmul's against the int8 peak (v5e: twice bf16's),
// on v7 (no int8 MXU path) against its bf16 peak, at the bf16 matmul's time.
TEST(CostModel, PeakTimeIsTheDtypes) {
  const CostModel v5e(torchtpu::runtime::chip_by_name("v5e"));
  const int64_t n = 4096;
  const auto i8 = v5e.matmul(1, n, n, n, 1, 1, 0, torchtpu::sim::MxuRate::int8);
  EXPECT_NEAR(i8.peak_s, 2.0 * n * n * n / 394e12, 1e-12);
  // Not 2: the int8 peak is the int8 rate; the achieved fraction of it, as for bf16.
  EXPECT_NEAR(i8.peak_s / i8.seconds(), v5e.mxu_efficiency(), 0.02);
  const CostModel v7(torchtpu::runtime::chip_by_name("v7"));
  const auto v7_i8 = v7.matmul(1, n, n, n, 1, 1, 0, torchtpu::sim::MxuRate::int8);
  const auto v7_bf16 = v7.matmul(1, n, n, n, 1, 2, 0);
  EXPECT_DOUBLE_EQ(v7_i8.mxu_s, v7_bf16.mxu_s);
  EXPECT_DOUBLE_EQ(v7_i8.peak_s, v7_bf16.peak_s);
}

TEST(CostModel, ElementwiseAddIsHbmBound) {
  const CostModel model(torchtpu::runtime::chip_by_name("v5e"));
  const int64_t n = 4096;
  const double bytes = 3 * CostModel::padded_bytes({n, n}, 4);
  EXPECT_EQ(bytes, 3.0 * n * n * 4);
  const auto e = model.vector(n * n, 1.0, bytes);
  EXPECT_STREQ(e.bound(), "hbm");
  // At the achieved bandwidth: 819 GB/s x 0.870 (Ironwood's measured copy rate, assumed for
  // v5e: ChipSpec.cpp): 0.283 ms (0.246 ms at the published bandwidth).
  EXPECT_NEAR(model.hbm_efficiency(), 0.870, 0.0005);
  EXPECT_NEAR(e.hbm_s, 3.0 * n * n * 4 / (819e9 * model.hbm_efficiency()), 1e-9);
  EXPECT_LT(e.vpu_s, e.hbm_s / 10);
}

// The model's assumptions are options of the model, not constants in the kernels.
TEST(CostModel, LaunchCostAndEmulationAreOptionsOfTheModel) {
  const auto& chip = torchtpu::runtime::chip_by_name("v5e");
  const CostModel standard(chip);
  EXPECT_DOUBLE_EQ(standard.vector(1024, 1.0, 0).launch_s, 2e-6);
  torchtpu::sim::CostOptions options;
  options.launch_seconds = 5e-6;
  options.emulation_factor = 4.0;
  const CostModel custom(chip, options);
  EXPECT_DOUBLE_EQ(custom.vector(1024, 1.0, 0).launch_s, 5e-6);
  EXPECT_DOUBLE_EQ(custom.vector(1 << 20, 2.0, 0, /*emulated=*/true).vpu_s,
                   4.0 * custom.vector(1 << 20, 2.0, 0).vpu_s);
  EXPECT_DOUBLE_EQ(standard.vector(1 << 20, 2.0, 0, true).vpu_s,
                   10.0 * standard.vector(1 << 20, 2.0, 0).vpu_s);
}

// A matmul and its epilogue are one launch: times and FLOPs add up, the bytes of the value that
// stays in the launch are not moved.
TEST(CostModel, CombinedPartsAreOneLaunch) {
  const CostModel model(torchtpu::runtime::chip_by_name("v5e"));
  const double bytes = 3 * CostModel::padded_bytes({1024, 1024}, 4);
  const auto mm = model.matmul(1, 1024, 1024, 1024, 1, 2, bytes);
  const auto epilogue = model.vector(1024 * 1024, 2.0, 2 * CostModel::padded_bytes({1024, 1024}, 4));
  const double kept = CostModel::padded_bytes({1024, 1024}, 4);
  const auto e = model.combine(mm, epilogue, kept);
  EXPECT_EQ(e.launches, 1);
  EXPECT_DOUBLE_EQ(e.launch_s, 2e-6);
  EXPECT_DOUBLE_EQ(e.mxu_s, mm.mxu_s);
  EXPECT_DOUBLE_EQ(e.vpu_s, mm.vpu_s + epilogue.vpu_s);
  EXPECT_DOUBLE_EQ(e.flops, mm.flops);
  EXPECT_DOUBLE_EQ(e.hbm_bytes, mm.hbm_bytes + epilogue.hbm_bytes - kept);
  EXPECT_DOUBLE_EQ(e.hbm_s, e.hbm_bytes / (819e9 * model.hbm_efficiency()));
}

TEST(CostModel, TilePadding) {
  EXPECT_EQ(CostModel::padded_bytes({3, 5}, 4), 8.0 * 128 * 4);
  EXPECT_EQ(CostModel::padded_bytes({3, 5}, 2), 16.0 * 128 * 2);
  EXPECT_EQ(CostModel::padded_bytes({2, 3, 5}, 1), 2 * 32.0 * 128);
  EXPECT_EQ(CostModel::padded_bytes({1000}, 4), 1024.0 * 4);
  EXPECT_EQ(CostModel::padded_bytes({}, 4), 4.0);
  EXPECT_EQ(CostModel::padded_bytes({0, 7}, 4), 0.0);
}

// The fast executor against the pass-by-pass reference, within the documented bound:
// |fast - ref| <= 2 K 2^-24 sum_k |a_k||b_k| (the passes are the same; only the order of the
// float32 additions within each pass's sum over K differs).
void check_executor(c10::ScalarType dtype, Precision p, int64_t M, int64_t K, int64_t N) {
  set_precision_override(p);
  at::manual_seed(M * 1000 + K);
  auto a = at::randn({M, K}).to(dtype), b = at::randn({K, N}).to(dtype);
  auto out = at::empty({M, N}, a.options());
  matmul(a, b, out, current_precision());
  set_precision_override(std::nullopt);
  auto af = a.to(at::kFloat).contiguous(), bf = b.to(at::kFloat).contiguous();
  std::vector<float> ref(M * N);
  const Precision ref_p = dtype == at::kBFloat16 ? Precision::kDefault : p;
  reference_matmul(af.data_ptr<float>(), bf.data_ptr<float>(), ref.data(), M, K, N, 128, ref_p);
  auto magnitude = at::matmul(af.abs().to(at::kDouble), bf.abs().to(at::kDouble));
  auto result = out.to(at::kDouble);
  const double u = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < M * N; ++i) {
    const double mag = magnitude.view(-1)[i].item<double>();
    double bound = 2.0 * K * u * mag;
    if (dtype == at::kBFloat16) bound += std::ldexp(std::abs(ref[i]), -8);  // one bf16 rounding
    if (dtype == at::kHalf) bound += std::ldexp(std::abs(ref[i]), -11);     // one fp16 rounding
    ASSERT_LE(std::abs(result.view(-1)[i].item<double>() - ref[i]), bound)
        << c10::toString(dtype) << " " << name(p) << " element " << i;
  }
}

TEST(Executor, WithinTheBoundOfTheReference) {
  for (auto p : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
    check_executor(at::kFloat, p, 17, 300, 23);
    check_executor(at::kHalf, p, 9, 130, 12);
  }
  check_executor(at::kBFloat16, Precision::kHighest, 33, 257, 19);
}

// With an inner size of 1 every pass is one exact product, so nothing is left to the GEMM's
// order: the fast executor equals the pass-by-pass reference bit for bit (the split, the
// passes taken and the order they are added in), on values over many binades and on zeros and
// infinities; and an infinite operand gives the CPU's infinity, not NaN (combine_passes).
TEST(Executor, EqualsTheReferenceBitForBitWithOneTermPerPass) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t M = 64, N = 96;
  std::vector<float> A(M), B(N);
  for (auto& x : A) x = normal(rng) * std::exp2(exponent(rng));
  for (auto& x : B) x = normal(rng) * std::exp2(exponent(rng));
  A[0] = 0.0f, A[1] = -0.0f, A[2] = std::numeric_limits<float>::infinity(), A[3] = 1.2f;
  B[0] = 1.0f, B[1] = -2.5f, B[2] = 1.2f, B[3] = -std::numeric_limits<float>::infinity();
  const auto a = at::from_blob(A.data(), {M, 1}).clone(), b = at::from_blob(B.data(), {1, N}).clone();
  for (auto p : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
    std::vector<float> ref(M * N);
    reference_matmul(A.data(), B.data(), ref.data(), M, 1, N, 128, p);
    auto out = at::empty({M, N});
    matmul(a, b, out, p);
    for (int64_t i = 0; i < M * N; ++i) {
      const float got = out.view(-1)[i].item<float>();
      ASSERT_TRUE(got == ref[i] || (std::isnan(got) && std::isnan(ref[i])))
          << name(p) << " element " << i << ": " << got << " vs " << ref[i];
    }
    // inf * 1.2 and 1.2 * -inf are infinite as on the CPU (the NaN mid and lo parts dropped)
    EXPECT_EQ(out[2][2].item<float>(), std::numeric_limits<float>::infinity()) << name(p);
    EXPECT_EQ(out[3][3].item<float>(), -std::numeric_limits<float>::infinity()) << name(p);
    EXPECT_TRUE(std::isnan(out[2][0].item<float>()) == false);
  }
  // The published TPU bit (PyTorch/XLA's precision tutorial, a real TPU at "highest"):
  // 1.2f * 1.2f is 0x3FB851ED, one unit in the last place above float32's product 0x3FB851EC.
  auto out = at::empty({M, N});
  matmul(a, b, out, Precision::kHighest);
  const float tpu = out[3][2].item<float>();
  uint32_t bits;
  std::memcpy(&bits, &tpu, sizeof bits);
  EXPECT_EQ(bits, 0x3FB851EDu);
  EXPECT_EQ(1.2f * 1.2f, 1.44000005722045898f);
}

// Every shape at::matmul takes (1-D to 3-D, a batch broadcast, a weight shared by a batch), at
// each precision (one host bf16 GEMM per pass where the library has it), against the passes'
// exact products summed in float64, within the bound above.
TEST(Executor, EveryMatmulShapeAtEachPrecisionWithinTheBound) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 5, 40}, {40, 7}}, {{3, 5, 40}, {3, 40, 7}}, {{1, 5, 40}, {3, 40, 7}},
      {{40}, {40, 7}},       {{5, 40}, {40}},          {{5, 40}, {2, 40, 7}},
      {{33, 257}, {257, 19}}, {{40}, {40}},
      // GEMMs large enough for oneDNN's kernel where it is built in (Mxu.cpp, kOneDnnMinimum):
      // a batch, a left operand broadcast over the batch, a weight shared by the batch.
      {{3, 64, 200}, {3, 200, 130}}, {{1, 64, 200}, {3, 200, 130}},
      {{3, 64, 200}, {200, 130}},    {{96, 300}, {300, 100}}};
  runtime::metrics::reset();
  at::manual_seed(3);
  for (const auto& [sa, sb] : shapes) {
    const auto a = at::randn(sa), b = at::randn(sb);
    const auto magnitude = at::matmul(a.abs().to(at::kDouble), b.abs().to(at::kDouble));
    const double bound_scale = 2.0 * sa.back() * std::ldexp(1.0, -24);
    for (auto p : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
      at::Tensor exact;
      if (p == Precision::kDefault) {
        exact = at::matmul(bf16_hi(a).to(at::kDouble), bf16_hi(b).to(at::kDouble));
      } else {
        const Part parts[3] = {Part::kHi, Part::kMid, Part::kLo};
        exact = at::zeros(magnitude.sizes(), magnitude.options());
        for (int i = 0; i < passes(p); ++i) {
          const PassPair pair = pass_pairs(p)[i];
          exact = exact + at::matmul(bf16_part(a, parts[pair.a_part]).to(at::kDouble),
                                     bf16_part(b, parts[pair.b_part]).to(at::kDouble));
        }
      }
      auto out = at::empty(exact.sizes());
      matmul(a, b, out, p);
      const auto excess = (out.to(at::kDouble) - exact).abs() - bound_scale * magnitude;
      ASSERT_LE(excess.max().item<double>(), 0.0)
          << name(p) << " " << c10::IntArrayRef(sa) << " @ " << c10::IntArrayRef(sb);
    }
  }
#ifdef TORCHTPU_ONEDNN
  if (onednn::available()) {  // (the large shapes took oneDNN's kernel: one GEMM per pass)
    EXPECT_EQ(runtime::metrics::snapshot(runtime::metrics::Category::counter)["mxu.onednn_gemms"],
              4 * (1 + 3 + 6));
  }
#endif
}

// Products larger than the partial results' budget (set_partial_floats_budget) run in blocks of
// GEMMs or of rows: the same values as in one block, within the bound of the exact passes, at
// "high" and "highest".
TEST(Executor, BlocksOfGemmsAndRowsGiveTheSameResult) {
  at::manual_seed(5);
  const int64_t budget = set_partial_floats_budget(int64_t(1) << 20);
  for (const auto& [sa, sb] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{5, 300, 64}, {5, 64, 1200}}, {{2100, 16}, {16, 2100}}}) {
    const auto a = at::randn(sa), b = at::randn(sb);
    for (auto p : {Precision::kHigh, Precision::kHighest}) {
      auto out = at::empty(at::matmul(a, b).sizes());
      matmul(a, b, out, p);
      std::vector<at::Tensor> partials;
      const Part parts[3] = {Part::kHi, Part::kMid, Part::kLo};
      for (int i = 0; i < passes(p); ++i) {
        const PassPair pair = pass_pairs(p)[i];
        partials.push_back(at::matmul(bf16_part(a, parts[pair.a_part]).to(at::kDouble),
                                      bf16_part(b, parts[pair.b_part]).to(at::kDouble)));
      }
      at::Tensor exact = partials[0];
      for (size_t i = 1; i < partials.size(); ++i) exact = exact + partials[i];
      const auto magnitude = at::matmul(a.abs().to(at::kDouble), b.abs().to(at::kDouble));
      const double scale = 2.0 * sa.back() * std::ldexp(1.0, -24);
      ASSERT_LE(((out.to(at::kDouble) - exact).abs() - scale * magnitude).max().item<double>(), 0.0)
          << name(p);
      // (each pass's GEMMs sum the same products in each block: the same bits as one block)
      const int64_t small = set_partial_floats_budget(budget);
      auto whole = at::empty(out.sizes());
      matmul(a, b, whole, p);
      set_partial_floats_budget(small);
      ASSERT_TRUE(at::equal(out, whole)) << name(p);
    }
  }
  set_partial_floats_budget(budget);
}

// "highest" with the float32 opt-in is the host's float32 GEMM: the CPU's result bit for bit.
TEST(Executor, HighestWithTheFloat32OptInIsTheCpusGemm) {
  at::manual_seed(6);
  const auto a = at::randn({40, 300}), b = at::randn({300, 50});
  const HighestAlgorithm before = highest_algorithm();
  set_highest_algorithm(HighestAlgorithm::kFloat32);
  auto out = at::empty({40, 50});
  matmul(a, b, out, Precision::kHighest);
  EXPECT_TRUE(at::equal(out, at::matmul(a, b)));
  set_highest_algorithm(HighestAlgorithm::kBf16x6);
  matmul(a, b, out, Precision::kHighest);
  EXPECT_FALSE(at::equal(out, at::matmul(a, b)));  // six passes: another rounding somewhere
  set_highest_algorithm(before);
  EXPECT_STREQ(name(HighestAlgorithm::kBf16x6), "bf16_6x");
  EXPECT_EQ(highest_algorithm_from_name("float32"), HighestAlgorithm::kFloat32);
  EXPECT_THROW(highest_algorithm_from_name("float64"), c10::ValueError);
}

// bfloat16 operands with a float32 result (an epilogue before the final rounding): exact
// products, float32 sums.
TEST(Executor, Bf16ToFloatKeepsTheAccumulatorUnrounded) {
  at::manual_seed(4);
  for (const auto& [sa, sb] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{17, 300}, {300, 23}}, {{4, 9, 64}, {4, 64, 5}}, {{4, 9, 64}, {64, 5}},
           {{2, 128, 256}, {2, 256, 100}}}) {
    const auto a = at::randn(sa).to(at::kBFloat16), b = at::randn(sb).to(at::kBFloat16);
    const auto exact = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
    auto out = at::empty(exact.sizes());
    matmul_bf16_to_float(a, b, out);
    const auto magnitude = at::matmul(a.abs().to(at::kDouble), b.abs().to(at::kDouble));
    const double scale = 2.0 * sa.back() * std::ldexp(1.0, -24);
    ASSERT_LE(((out.to(at::kDouble) - exact).abs() - scale * magnitude).max().item<double>(), 0.0);
    // (and not rounded to bfloat16: some element keeps bits below bf16's precision)
    ASSERT_FALSE(at::equal(out, out.to(at::kBFloat16).to(at::kFloat)));
  }
}

TEST(Executor, PrecisionChangesTheResultAsDocumented) {
  at::manual_seed(0);
  auto a = at::randn({32, 512}), b = at::randn({512, 16});
  auto exact = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
  double err[3];
  int i = 0;
  for (auto p : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
    set_precision_override(p);
    auto out = at::empty({32, 16});
    matmul(a, b, out, current_precision());
    err[i++] = (out.to(at::kDouble) - exact).abs().max().item<double>();
  }
  set_precision_override(std::nullopt);
  EXPECT_GT(err[0], 1e-3);        // one bf16 pass: ~2^-9 relative per product
  EXPECT_LT(err[1], err[0] / 50);  // bf16_3x
  EXPECT_LT(err[2], err[1]);       // six passes: float32 accuracy
  EXPECT_LT(err[2], 1e-4);
}

TEST(Executor, Int8AccumulatesExactlyInInt32) {
  auto a = at::randint(-128, 128, {20, 700}, at::kChar);
  auto b = at::randint(-128, 128, {700, 9}, at::kChar);
  auto out = at::empty({20, 9}, at::kInt);
  matmul(a, b, out, current_precision());
  EXPECT_TRUE(at::equal(out, at::matmul(a.to(at::kLong), b.to(at::kLong)).to(at::kInt)));
}

}  // namespace
