#include "sim/CostModel.h"

#include "runtime/Env.h"
#include "sim/Ledger.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace torchtpu::sim {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Sublane tile height for an element size: 8 rows of 32-bit, 16 of 16-bit, 32 of 8-bit.
int64_t sublanes(int element_bytes) { return 8 * std::max(1, 4 / std::max(1, element_bytes)); }

}  // namespace

double Estimate::seconds() const { return std::max({mxu_s, vpu_s, hbm_s, ici_s}) + launch_s; }

const char* Estimate::bound() const {
  if (ici_s > 0 && ici_s >= std::max({mxu_s, vpu_s, hbm_s})) return "ici";
  if (mxu_s >= vpu_s && mxu_s >= hbm_s) return "mxu";
  return vpu_s >= hbm_s ? "vpu" : "hbm";
}

Work& Work::operator+=(const Work& o) {
  matmuls.append(o.matmuls.begin(), o.matmuls.end());
  vpu_units += o.vpu_units;
  hbm_bytes += o.hbm_bytes;
  launches += o.launches;
  priced_as_native = priced_as_native || o.priced_as_native;
  if (o.collective.kind != CollectiveKind::none) collective = o.collective;
  return *this;
}

Estimate& Estimate::operator+=(const Estimate& o) {
  mxu_s += o.mxu_s;
  vpu_s += o.vpu_s;
  hbm_s += o.hbm_s;
  ici_s += o.ici_s;
  launch_s += o.launch_s;
  flops += o.flops;
  peak_s += o.peak_s;
  mxu_flops += o.mxu_flops;
  hbm_bytes += o.hbm_bytes;
  launches += o.launches;
  work += o.work;
  return *this;
}

namespace {

// A setting given for every chip ("1.5") or per chip ("v5e:2,v7:1"): the value for `chip`,
// or nothing when the list does not name it.
std::optional<std::string> setting_for_chip(const char* variable, const std::string& text,
                                            const std::string& chip) {
  if (text.find(':') == std::string::npos) return text;
  std::optional<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t colon = item.find(':');
    TORCH_CHECK_VALUE(colon != std::string::npos, variable, ": expected 'chip:value' items, got '",
                      item, "' in '", text, "'");
    const std::string name = item.substr(0, colon);
    runtime::chip_by_name(name);  // an unknown chip is an error, naming the known ones
    if (name == chip) out = item.substr(colon + 1);
    start = end + 1;
  }
  return out;
}

}  // namespace

CostOptions CostOptions::from_environment(const std::string& chip) {
  CostOptions o;
  if (auto us = runtime::env::get("TORCHTPU_LAUNCH_US")) {
    if (auto value = setting_for_chip("TORCHTPU_LAUNCH_US", *us, chip)) {
      double s = -1;
      try {
        s = std::stod(*value) * 1e-6;
      } catch (const std::exception&) {
      }
      TORCH_CHECK_VALUE(s >= 0, "TORCHTPU_LAUNCH_US must be a number of microseconds >= 0 or "
                        "a list like 'v5e:2,v7:1', got '", *us, "'");
      o.launch_seconds = s;
    }
  }
  if (auto f = runtime::env::get("TORCHTPU_EMULATION_FACTOR")) {
    o.emulation_factor = std::stod(*f);
    TORCH_CHECK_VALUE(o.emulation_factor >= 1, "TORCHTPU_EMULATION_FACTOR must be >= 1, got ", *f);
  }
  if (auto t = runtime::env::get("TORCHTPU_TOPOLOGY")) {
    if (auto value = setting_for_chip("TORCHTPU_TOPOLOGY", *t, chip)) {
      o.topology = parse_topology(*value);
    }
  } else if (auto t = runtime::env::get("TORCH_TPU_TOPOLOGY"); t && !t->empty()) {
    // TorchTPU's launchers' variable: chips per axis separated by commas ("2,2,1").
    std::string text = *t;
    std::replace(text.begin(), text.end(), ',', 'x');
    o.topology = parse_topology(text);
  }
  return o;
}

c10::SmallVector<int64_t, 3> parse_topology(const std::string& text) {
  c10::SmallVector<int64_t, 3> dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('x', start), text.size());
    int64_t d = 0;
    try {
      size_t used = 0;
      const std::string item = text.substr(start, end - start);
      d = std::stoll(item, &used);
      if (used != item.size()) d = 0;
    } catch (const std::exception&) {
    }
    TORCH_CHECK_VALUE(d >= 1, "A slice topology is chips per torus axis, like '4x4' or "
                      "'2x2x4' (TORCHTPU_TOPOLOGY, --topology); got '", text, "'");
    dims.push_back(d);
    start = end + 1;
  }
  TORCH_CHECK_VALUE(dims.size() <= 3, "A slice topology has at most 3 axes; got '", text, "'");
  return dims;
}

CostModel::CostModel(const runtime::ChipSpec& chip, Options options)
    : chip_(&chip),
      clock_hz_(chip.clock_hz),
      mxu_cycles_per_s_(chip.bf16_flops / (2.0 * chip.mxu_dim * chip.mxu_dim *
                                           chip.mxus_per_core * chip.tensor_cores)),
      options_(options) {
  TORCH_CHECK(chip.clock_hz > 0 && chip.vpu_alus > 0 && chip.mxu_macs_per_cell > 0,
              "chip ", chip.name, ": clock, VPU ALUs and MXU multiply-adds per cell must be set");
  TORCH_CHECK(chip.mxu_efficiency > 0 && chip.mxu_efficiency <= 1 && chip.hbm_efficiency > 0 &&
                  chip.hbm_efficiency <= 1,
              "chip ", chip.name, ": the achieved MXU and HBM rates are fractions of the peaks");
}

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

double CostModel::vpu_units(int64_t elements, double units, bool emulated) const {
  const double vregs = std::ceil(double(elements) / (chip_->vpu_sublanes * chip_->vpu_lanes));
  return this->units(units, emulated) * vregs;
}

double CostModel::peak_of(MxuRate rate) const {
  switch (rate) {
    case MxuRate::int8:
      return chip_->int8_ops;
    case MxuRate::fp8:
      return chip_->fp8_ops > 0 ? chip_->fp8_ops : chip_->bf16_flops;
    case MxuRate::bf16:
      break;
  }
  return chip_->bf16_flops;
}

double CostModel::rate_factor(MxuRate rate) const {
  // Cycles at the bf16 rate times bf16 peak / the rate's peak.
  switch (rate) {
    case MxuRate::int8:
      return chip_->bf16_flops / chip_->int8_ops;
    case MxuRate::fp8:
      return chip_->fp8_ops > 0 ? chip_->bf16_flops / chip_->fp8_ops : 1.0;
    case MxuRate::bf16:
      break;
  }
  return 1.0;
}

Estimate CostModel::price(const Work& w) const {
  Estimate e;
  const int S = chip_->mxu_dim;
  double cycles = 0;
  for (const MatmulWork& m : w.matmuls) {
    cycles += double(mxu_cycles(m.batch, m.M, m.K, m.N, m.element_bytes)) * m.passes *
              rate_factor(m.rate);
    e.flops += 2.0 * m.batch * m.M * m.K * m.N;
    e.peak_s += 2.0 * m.batch * m.M * m.K * m.N / peak_of(m.rate);
    e.mxu_flops += 2.0 * m.batch * round_up(m.M, sublanes(m.element_bytes)) *
                   round_up(m.K, S) * round_up(m.N, S) * m.passes;
  }
  e.mxu_s = cycles / (mxu_cycles_per_s_ * chip_->mxu_efficiency);
  e.vpu_s = w.vpu_units / vpu_units_per_s();
  e.hbm_bytes = w.hbm_bytes;
  e.hbm_s = w.hbm_bytes / (chip_->hbm_bytes_per_s * chip_->hbm_efficiency);
  e.ici_s = ici_seconds(w.collective);
  e.launches = w.launches;
  e.launch_s = double(w.launches) * options_.launch_seconds;
  e.work = w;
  return e;
}

// ICI. Per-link bandwidth W (bidirectional) and the latency of a hop, from "How to Scale Your
// Model" (jax-ml.github.io/scaling-book, "How to Think About TPUs" and "Sharded Matrices"):
// W = 9e10 B/s on v4 and v5e, 1.8e11 B/s on v5p, v6e and v7; about 1 us per hop.
//
// A group of N chips lies along the axes of the slice's topology, filling the first axis, then
// the second (a 4x4 slice: a group of 4 is one row, of 8 two rows, of 16 the whole slice); with
// no topology set, the group is one ring of N chips along one axis. An axis with a wraparound
// link (16 chips on the 2-D tori of v5e and v6e; 4 or more, a full cube edge, on the 3-D tori
// of v4, v5p and v7) moves data both ways at W, one without it one way at W / 2; a collective
// over several axes uses all of their links at once (the book's multi-axis formulas), so the
// bandwidth W' is the sum over the group's axes. For the whole array of V bytes (the book's
// bidirectional-ring formulas, with the exact (N - 1) / N factor):
//   all-gather, reduce-scatter, broadcast, reduce: (N - 1) / N * V / W'
//   all-reduce (a reduce-scatter then an all-gather): 2 (N - 1) / N * V / W'
//   all-to-all: V / (4 W')
//   send / recv: V / (W / 2) (one link, one way) plus a hop; barrier: latency only
// and never less than the hops' latency: per axis of A chips A / 2 hops (A - 1 without a
// wraparound) of 1 us, summed over the axes.
double CostModel::ici_seconds(const CollectiveWork& c) const {
  if (c.kind == CollectiveKind::none) return 0;
  const bool wide_links = chip_->name == "v5p" || chip_->name == "v6e" || chip_->name == "v7";
  const double link = wide_links ? 1.8e11 : 9e10;
  const bool torus_3d = chip_->name == "v4" || chip_->name == "v5p" || chip_->name == "v7";
  const int64_t n = std::max<int32_t>(c.chips, 1);
  // One transfer over one link, one way.
  if (c.kind == CollectiveKind::send_recv) return c.bytes / (link / 2) + 1e-6;
  if (n <= 1) return 0;
  // The group's axes: (length, full axis of the slice).
  c10::SmallVector<std::pair<int64_t, bool>, 3> axes;
  const auto& topology = options_.topology;
  if (topology.empty()) {
    axes.push_back({n, true});
  } else {
    int64_t slice = 1, used_axes = 0;
    for (int64_t d : topology) {
      slice *= d;
      used_axes += d > 1 ? 1 : 0;
    }
    TORCH_CHECK_VALUE(used_axes <= (torus_3d ? 3 : 2), "The slice topology ",
                      c10::Join("x", topology), " has ", used_axes, " axes; ", chip_->name,
                      "'s torus has ", torus_3d ? 3 : 2, " (set it per chip: "
                      "TORCHTPU_TOPOLOGY='v5p:2x2x2,v5e:4x2')");
    TORCH_CHECK_VALUE(n <= slice, "A collective over ", n, " chips does not fit the slice "
                      "topology ", c10::Join("x", topology), " (", slice, " chips) set for ",
                      chip_->name, ": give a topology of at least ", n, " chips");
    int64_t left = n;
    for (int64_t d : topology) {
      if (left <= 1) break;
      if (d == 1) continue;
      const int64_t along = std::min(left, d);
      TORCH_CHECK_VALUE(left % along == 0, "A group of ", n, " chips does not fill whole axes "
                        "of the slice topology ", c10::Join("x", topology), " on ", chip_->name);
      axes.push_back({along, along == d});
      left /= along;
    }
  }
  double bandwidth = 0, hops = 0;
  for (const auto& [length, full] : axes) {
    if (length <= 1) continue;
    const bool wraparound = full && (torus_3d ? length >= 4 : length >= 16);
    bandwidth += wraparound ? link : link / 2;
    hops += wraparound ? double(length) / 2 : double(length - 1);
  }
  const double latency = hops * 1e-6;
  const double share = double(n - 1) / double(n);
  double bandwidth_s = 0;
  switch (c.kind) {
    case CollectiveKind::all_reduce: bandwidth_s = 2 * share * c.bytes / bandwidth; break;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce: bandwidth_s = share * c.bytes / bandwidth; break;
    case CollectiveKind::all_to_all: bandwidth_s = c.bytes / (4 * bandwidth); break;
    case CollectiveKind::send_recv:
    case CollectiveKind::barrier:
    case CollectiveKind::none: break;
  }
  return std::max(latency, bandwidth_s);
}

Estimate CostModel::collective(CollectiveKind kind, double bytes, int64_t chips) const {
  Work w;
  w.collective = {kind, bytes, static_cast<int32_t>(chips)};
  w.launches = 1;
  return price(w);
}

Estimate CostModel::matmul(int64_t batch, int64_t M, int64_t K, int64_t N, int passes,
                           int element_bytes, double hbm_bytes, MxuRate rate) const {
  Work w;
  if (batch > 0 && M > 0 && N > 0) {
    w.matmuls.push_back({batch, M, K, N, passes, element_bytes, rate});
  }
  w.hbm_bytes = hbm_bytes;
  w.launches = 1;
  return price(w);
}

Estimate CostModel::vector(int64_t elements, double units, double hbm_bytes, bool emulated) const {
  Work w;
  w.vpu_units = vpu_units(elements, units, emulated);
  w.hbm_bytes = hbm_bytes;
  w.launches = 1;
  return price(w);
}

Estimate CostModel::combine(const Estimate& a, const Estimate& b, double kept_bytes) const {
  Work w = a.work;
  w += b.work;
  w.hbm_bytes = a.work.hbm_bytes + b.work.hbm_bytes - kept_bytes;
  w.launches = 1;
  return price(w);
}

const CostModel& cost_model() {
  static const CostModel model(runtime::current_chip(),
                               CostModel::Options::from_environment(runtime::current_chip().name));
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
  ledger_add(op, e);
}

}  // namespace torchtpu::sim
