#include "sim/CostModel.h"

#include "runtime/Env.h"
#include "runtime/Metrics.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

namespace torchtpu::sim {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Sublane tile height for an element size: 8 rows of 32-bit, 16 of 16-bit, 32 of 8-bit.
int64_t sublanes(int element_bytes) { return 8 * std::max(1, 4 / std::max(1, element_bytes)); }

}  // namespace

double Estimate::seconds() const { return std::max({mxu_s, vpu_s, hbm_s}) + launch_s; }

const char* Estimate::bound() const {
  if (mxu_s >= vpu_s && mxu_s >= hbm_s) return "mxu";
  return vpu_s >= hbm_s ? "vpu" : "hbm";
}

Estimate& Estimate::operator+=(const Estimate& o) {
  mxu_s += o.mxu_s;
  vpu_s += o.vpu_s;
  hbm_s += o.hbm_s;
  launch_s += o.launch_s;
  flops += o.flops;
  mxu_flops += o.mxu_flops;
  hbm_bytes += o.hbm_bytes;
  launches += o.launches;
  return *this;
}

CostOptions CostOptions::from_environment() {
  CostOptions o;
  if (auto us = runtime::env::get("TORCHTPU_LAUNCH_US")) {
    o.launch_seconds = std::stod(*us) * 1e-6;
    TORCH_CHECK_VALUE(o.launch_seconds >= 0, "TORCHTPU_LAUNCH_US must be >= 0, got ", *us);
  }
  if (auto f = runtime::env::get("TORCHTPU_EMULATION_FACTOR")) {
    o.emulation_factor = std::stod(*f);
    TORCH_CHECK_VALUE(o.emulation_factor >= 1, "TORCHTPU_EMULATION_FACTOR must be >= 1, got ", *f);
  }
  return o;
}

CostModel::CostModel(const runtime::ChipSpec& chip, Options options)
    : chip_(&chip),
      clock_hz_(chip.bf16_flops /
                (2.0 * chip.mxu_dim * chip.mxu_dim * chip.mxus_per_core * chip.tensor_cores)),
      options_(options) {}

int64_t CostModel::tile_cycles(int64_t M, int64_t Nt, int S) {
  if (M == 0) return S;
  return S /* weight load */ + (M + S + Nt - 2) /* skewed streaming until the last output */;
}

int64_t CostModel::mxu_cycles(int64_t batch, int64_t M, int64_t K, int64_t N,
                              int element_bytes) const {
  const int S = chip_->mxu_dim;
  if (batch == 0 || M == 0 || N == 0) return 0;
  const int64_t m_rows = round_up(M, sublanes(element_bytes));
  const int64_t tiles = batch * ((std::max<int64_t>(K, 1) + S - 1) / S) * ((N + S - 1) / S);
  const int64_t per_mxu = (tiles + mxus() - 1) / mxus();
  // First weight load, then per tile max(rows streamed, next weight load), then the drain.
  return S + per_mxu * std::max<int64_t>(m_rows, S) + (2 * int64_t(S) - 2);
}

double CostModel::padded_bytes(c10::IntArrayRef sizes, int element_bytes) {
  if (sizes.empty()) return element_bytes;  // a scalar
  int64_t numel = 1;
  for (auto s : sizes) numel *= s;
  if (numel == 0) return 0;
  if (sizes.size() == 1) return double(round_up(sizes[0], 1024)) * element_bytes;
  const int64_t rows = sizes[sizes.size() - 2];
  const int64_t cols = sizes[sizes.size() - 1];
  const int64_t outer = numel / (rows * cols);
  return double(outer) * round_up(rows, sublanes(element_bytes)) * round_up(cols, 128) *
         element_bytes;
}

Estimate CostModel::matmul(int64_t batch, int64_t M, int64_t K, int64_t N, int passes,
                           int element_bytes, double hbm_bytes) const {
  Estimate e;
  const int S = chip_->mxu_dim;
  const double cycles = double(mxu_cycles(batch, M, K, N, element_bytes)) * passes;
  e.mxu_s = cycles / clock_hz_;
  e.flops = 2.0 * batch * M * K * N;
  e.mxu_flops = 2.0 * batch * round_up(M, sublanes(element_bytes)) * round_up(K, S) *
                round_up(N, S) * passes;
  e.hbm_bytes = hbm_bytes;
  e.hbm_s = hbm_bytes / chip_->hbm_bytes_per_s;
  e.launch_s = options_.launch_seconds;
  e.launches = 1;
  return e;
}

Estimate CostModel::vector(int64_t elements, double units, double hbm_bytes, bool emulated) const {
  Estimate e;
  const double vregs = std::ceil(double(elements) / (chip_->vpu_sublanes * chip_->vpu_lanes));
  e.vpu_s = this->units(units, emulated) * vregs / (clock_hz_ * chip_->tensor_cores);
  e.hbm_bytes = hbm_bytes;
  e.hbm_s = hbm_bytes / chip_->hbm_bytes_per_s;
  e.launch_s = options_.launch_seconds;
  e.launches = 1;
  return e;
}

Estimate CostModel::combine(const Estimate& a, const Estimate& b, double kept_bytes) const {
  Estimate e;
  e.mxu_s = a.mxu_s + b.mxu_s;
  e.vpu_s = a.vpu_s + b.vpu_s;
  e.flops = a.flops + b.flops;
  e.mxu_flops = a.mxu_flops + b.mxu_flops;
  e.hbm_bytes = a.hbm_bytes + b.hbm_bytes - kept_bytes;
  e.hbm_s = e.hbm_bytes / chip_->hbm_bytes_per_s;
  e.launch_s = options_.launch_seconds;
  e.launches = 1;
  return e;
}

const CostModel& cost_model() {
  static const CostModel model(runtime::current_chip(), CostModel::Options::from_environment());
  return model;
}

namespace {
thread_local RecordCollector* tls_collector = nullptr;
}  // namespace

RecordCollector::RecordCollector() : previous_(tls_collector) { tls_collector = this; }
RecordCollector::~RecordCollector() { tls_collector = previous_; }

void record(const std::string& op, const Estimate& e) {
  if (tls_collector != nullptr) {
    tls_collector->total += e;
    return;
  }
  using runtime::metrics::Counter;
  static const Counter launches("estimate.launches"), device_time("estimate.device_time_ps"),
      mxu_time("estimate.mxu_time_ps"), vpu_time("estimate.vpu_time_ps"),
      hbm_time("estimate.hbm_time_ps"), flops("estimate.flops"), mxu_flops("estimate.mxu_flops"),
      hbm_bytes("estimate.hbm_bytes"), bound_mxu("estimate.bound.mxu"),
      bound_vpu("estimate.bound.vpu"), bound_hbm("estimate.bound.hbm");
  auto ps = [](double s) { return int64_t(std::llround(s * 1e12)); };
  launches.add(e.launches);
  device_time.add(ps(e.seconds()));
  mxu_time.add(ps(e.mxu_s));
  vpu_time.add(ps(e.vpu_s));
  hbm_time.add(ps(e.hbm_s));
  flops.add(int64_t(e.flops));
  mxu_flops.add(int64_t(e.mxu_flops));
  hbm_bytes.add(int64_t(e.hbm_bytes));
  const char* bound = e.bound();
  (bound[0] == 'm' ? bound_mxu : bound[0] == 'v' ? bound_vpu : bound_hbm).add(1);
  using runtime::metrics::add;
  using runtime::metrics::Category;
  add(Category::op_time, op, ps(e.seconds()));
}

}  // namespace torchtpu::sim
