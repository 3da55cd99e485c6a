#include "sim/Ledger.h"

#include "runtime/ChipSpec.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/ApproximateClock.h>
#include <c10/util/hash.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace torchtpu::sim {

void Priced::add(const Estimate& e, int64_t count) {
  const double n = double(count);
  busy_s += std::max({e.mxu_s, e.vpu_s, e.hbm_s, e.ici_s}) * n;
  mxu_s += e.mxu_s * n;
  ici_s += e.ici_s * n;
  vpu_s += e.vpu_s * n;
  hbm_s += e.hbm_s * n;
  flops += e.flops * n;
  peak_s += e.peak_s * n;
  mxu_flops += e.mxu_flops * n;
  hbm_bytes += e.hbm_bytes * n;
  launches += e.launches * count;
  const char* bound = e.bound();
  (bound[0] == 'm'   ? bound_mxu
   : bound[0] == 'v' ? bound_vpu
   : bound[0] == 'i' ? bound_ici
                     : bound_hbm) += e.launches * count;
  if (e.work.priced_as_native) priced_as_native += e.launches * count;
}

Priced& Priced::operator+=(const Priced& o) {
  busy_s += o.busy_s;
  mxu_s += o.mxu_s;
  vpu_s += o.vpu_s;
  hbm_s += o.hbm_s;
  ici_s += o.ici_s;
  flops += o.flops;
  peak_s += o.peak_s;
  mxu_flops += o.mxu_flops;
  hbm_bytes += o.hbm_bytes;
  launches += o.launches;
  bound_mxu += o.bound_mxu;
  bound_vpu += o.bound_vpu;
  bound_hbm += o.bound_hbm;
  bound_ici += o.bound_ici;
  priced_as_native += o.priced_as_native;
  return *this;
}

namespace {

// Entries per thread table before it is folded into per-chip totals.
constexpr size_t kMaxEntries = 100000;

struct Key {
  uint32_t op;
  int32_t device;  // the device the launch ran on (devices run in parallel)
  Work work;
  size_t hash;
  bool operator==(const Key& o) const {
    return op == o.op && device == o.device && hash == o.hash && work == o.work;
  }
};

// Folded totals are kept per (op, device).
uint64_t op_device(uint32_t op, int32_t device) {
  return (uint64_t(op) << 32) | uint32_t(device);
}

struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

size_t hash_of(uint32_t op, int32_t device, const Work& w) {
  size_t h = c10::hash_combine(op_device(op, device), std::hash<double>()(w.vpu_units));
  h = c10::hash_combine(h, std::hash<double>()(w.hbm_bytes));
  h = c10::hash_combine(h, std::hash<int64_t>()(w.launches) * 2 + (w.priced_as_native ? 1 : 0));
  h = c10::hash_combine(h, static_cast<size_t>(w.collective.kind) * 1000003 +
                              std::hash<double>()(w.collective.bytes) + size_t(w.collective.chips));
  for (const MatmulWork& m : w.matmuls) {
    h = c10::hash_combine(h, std::hash<int64_t>()(m.batch));
    h = c10::hash_combine(h, std::hash<int64_t>()(m.M));
    h = c10::hash_combine(h, std::hash<int64_t>()(m.K));
    h = c10::hash_combine(h, std::hash<int64_t>()(m.N));
    h = c10::hash_combine(h, size_t(m.passes) * 64 + size_t(m.element_bytes) * 4 +
                                 static_cast<size_t>(m.rate));
  }
  return h;
}

// Op names, interned (the ledger's keys hold an index).
struct Names {
  std::mutex mutex;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<std::string> names;
  uint32_t intern(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, added] = index.emplace(name, uint32_t(names.size()));
    if (added) names.push_back(name);
    return it->second;
  }
  std::string name(uint32_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return names[i];
  }
};

Names& names() {
  static auto* n = new Names();  // leaked: used from thread exits at process end
  return *n;
}

// The known chips: their cost models and launch costs, in runtime::all_chips() order.
const std::vector<CostModel>& chip_models() {
  static const std::vector<CostModel> models = [] {
    std::vector<CostModel> m;
    for (const auto& chip : runtime::all_chips()) {
      m.emplace_back(chip, CostOptions::from_environment(chip.name));
    }
    return m;
  }();
  return models;
}

// Per-chip totals of folded entries, by op_device().
using Folded = std::unordered_map<std::string, std::unordered_map<uint64_t, Priced>>;

struct Table {
  std::mutex mutex;
  std::unordered_map<Key, int64_t, KeyHash> counts;
  Folded folded;
};

// The duration of `work` on `model`'s chip; 0 where that chip cannot price it (a slice
// topology its torus cannot have: pricing for that chip raises the error, this does not).
double seconds_or_zero(const CostModel& model, const Work& work) {
  try {
    return model.price(work).seconds();
  } catch (const c10::Error&) {
    return 0;
  }
}

void fold(Table& t) {
  // Priced for every known chip with its own model: exact for those chips afterwards. A chip
  // that cannot price a launch (see seconds_or_zero) gets no folded totals: pricing the run for
  // it then raises.
  for (const CostModel& model : chip_models()) {
    Folded::mapped_type per_op;
    try {
      for (const auto& [key, count] : t.counts) {
        per_op[op_device(key.op, key.device)].add(model.price(key.work), count);
      }
    } catch (const c10::Error&) {
      continue;
    }
    auto& into = t.folded[model.chip().name];
    for (auto& [op, priced] : per_op) into[op] += priced;
  }
  t.counts.clear();
}

void merge(Table& into, Table& from) {
  for (auto& [key, count] : from.counts) into.counts[key] += count;
  for (auto& [chip, per_op] : from.folded) {
    for (auto& [op, priced] : per_op) into.folded[chip][op] += priced;
  }
  from.counts.clear();
  from.folded.clear();
}

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Table>> tables;  // the tables of live threads
  Table retired;                               // what exited threads added
};

Registry& registry() {
  static auto* r = new Registry();  // leaked: used from thread exits at process end
  return *r;
}

struct ThreadTable {
  std::shared_ptr<Table> table = std::make_shared<Table>();
  std::unordered_map<std::string, uint32_t> ops;  // this thread's view of the interned names
  ThreadTable() {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.tables.push_back(table);
  }
  ~ThreadTable() {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    {
      std::lock_guard<std::mutex> mine(table->mutex);
      merge(r.retired, *table);
    }
    r.tables.erase(std::find(r.tables.begin(), r.tables.end(), table));
  }
  uint32_t op(const std::string& name) {
    if (auto it = ops.find(name); it != ops.end()) return it->second;
    const uint32_t i = names().intern(name);
    ops.emplace(name, i);
    return i;
  }
};

ThreadTable& thread_table() {
  thread_local ThreadTable t;
  return t;
}

// ---- The device trace.

std::atomic<bool> g_tracing{false};
std::mutex g_trace_mutex;
std::vector<TraceEvent> g_trace;
thread_local std::vector<uint64_t> tls_correlation;
// The last traced launch of this thread, until aten::launch takes its host-time slot.
thread_local std::string tls_last_traced;
thread_local std::shared_ptr<std::atomic<int64_t>> tls_last_slot;

void trace(const std::string& op, const Estimate& e) {
  TraceEvent ev;
  ev.name = op;
  ev.device = runtime::current_device();
  ev.stream = runtime::current_stream(static_cast<c10::DeviceIndex>(ev.device)).id();
  ev.issued_ns = c10::getTime();
  thread_local const int32_t tid = static_cast<int32_t>(syscall(SYS_gettid));
  ev.thread = tid;
  ev.seconds = e.seconds();
  ev.correlation = tls_correlation.empty() ? 0 : tls_correlation.back();
  ev.bound = e.bound();
  ev.flops = e.flops;
  ev.hbm_bytes = e.hbm_bytes;
  ev.launches = e.launches;
  ev.priced_as_native = e.work.priced_as_native;
  ev.host_ns = std::make_shared<std::atomic<int64_t>>(-1);
  tls_last_traced = op;
  tls_last_slot = ev.host_ns;
  std::lock_guard<std::mutex> lock(g_trace_mutex);
  g_trace.push_back(std::move(ev));
}

// ---- The overlap clocks (Ledger.h, "Overlap of communication with compute").

// Times in seconds since the clocks started, one per known chip.
using Times = std::vector<double>;

void raise_to(Times& t, const Times& floor) {
  for (size_t c = 0; c < t.size(); ++c) t[c] = std::max(t[c], floor[c]);
}

struct DeviceClocks {
  Times tensor_core, ici, serial;       // engines free at; sum of every duration
  std::map<int64_t, Times> streams;     // each stream's last launch ends at
  Times& stream(int64_t id) {
    auto [it, fresh] = streams.try_emplace(id, Times(serial.size(), 0.0));
    return it->second;
  }
};

struct Clocks {
  std::mutex mutex;
  std::map<int32_t, DeviceClocks> devices;
  std::map<uint64_t, Times> collective_end;  // by collective id, until waited for
  std::map<const void*, Times> events;       // each recorded event's time
  uint64_t next_id = 1;
  DeviceClocks& device(int32_t d) {
    auto [it, fresh] = devices.try_emplace(d);
    if (fresh) {
      const size_t n = chip_models().size();
      it->second.tensor_core = it->second.ici = it->second.serial = Times(n, 0.0);
    }
    return it->second;
  }
};
Clocks& clocks() {
  static auto* c = new Clocks();  // leaked: used at process end
  return *c;
}
std::atomic<bool> g_clocks_on{false};  // from the first collective on

int64_t stream_of(int32_t device) {
  return runtime::current_stream(static_cast<c10::DeviceIndex>(device)).id();
}

// One launch of `work` on the current stream of `device`, on the TensorCore or (a collective)
// the ICI. Returns when it ends.
Times advance(const Work& work, int32_t device, bool on_ici) {
  const auto& models = chip_models();
  Times duration(models.size());
  for (size_t c = 0; c < models.size(); ++c) {
    duration[c] = seconds_or_zero(models[c], work);
  }
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock(k.mutex);
  DeviceClocks& d = k.device(device);
  Times& stream = d.stream(stream_of(device));
  Times& engine = on_ici ? d.ici : d.tensor_core;
  for (size_t c = 0; c < duration.size(); ++c) {
    const double end = std::max(stream[c], engine[c]) + duration[c];
    stream[c] = engine[c] = end;
    d.serial[c] += duration[c];
  }
  return stream;
}

void observe_event(const void* event, const c10::Stream& stream, bool recorded) {
  if (!g_clocks_on.load(std::memory_order_relaxed)) return;
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock(k.mutex);
  Times& at = k.device(stream.device_index()).stream(stream.id());
  if (recorded) {
    k.events[event] = at;
  } else if (auto it = k.events.find(event); it != k.events.end()) {
    raise_to(at, it->second);  // the stream waits for the event
  }
}

const bool observer_registered = [] {
  runtime::set_event_observer(&observe_event);
  return true;
}();

}  // namespace

uint64_t collective_issued(const Estimate& e) {
  g_clocks_on.store(true, std::memory_order_relaxed);
  const Times end = advance(e.work, runtime::current_device(), /*on_ici=*/true);
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock(k.mutex);
  const uint64_t id = k.next_id++;
  k.collective_end[id] = end;
  return id;
}

void collective_waited(uint64_t id) {
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock(k.mutex);
  auto it = k.collective_end.find(id);
  if (it == k.collective_end.end()) return;
  const int32_t device = runtime::current_device();
  raise_to(k.device(device).stream(stream_of(device)), it->second);
  k.collective_end.erase(it);
}

std::map<int, double> hidden_ici_seconds(const runtime::ChipSpec& chip) {
  const auto& all = runtime::all_chips();
  size_t c = 0;
  while (c < all.size() && all[c].name != chip.name) ++c;
  TORCH_CHECK(c < all.size(), "unknown chip ", chip.name);
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock(k.mutex);
  std::map<int, double> out;
  for (const auto& [device, d] : k.devices) {
    double makespan = std::max(d.tensor_core[c], d.ici[c]);
    for (const auto& [id, t] : d.streams) makespan = std::max(makespan, t[c]);
    out[device] = std::max(0.0, d.serial[c] - makespan);
  }
  return out;
}

void ledger_add(const std::string& op, const Estimate& e) {
  ThreadTable& t = thread_table();
  const uint32_t index = t.op(op);
  const int32_t device = runtime::current_device();
  Key key{index, device, e.work, hash_of(index, device, e.work)};
  {
    std::lock_guard<std::mutex> lock(t.table->mutex);
    t.table->counts[std::move(key)] += 1;
    if (t.table->counts.size() > kMaxEntries) fold(*t.table);
  }
  if (g_tracing.load(std::memory_order_relaxed)) trace(op, e);
  if (g_clocks_on.load(std::memory_order_relaxed) && e.work.collective.kind == CollectiveKind::none) {
    advance(e.work, device, /*on_ici=*/false);
  }
}

LedgerTotals ledger_totals(const runtime::ChipSpec& chip) {
  const CostModel model(chip, CostOptions::from_environment(chip.name));
  std::unordered_map<uint64_t, Priced> per_op;  // by op_device()
  std::unordered_map<uint32_t, int64_t> native;
  auto add_table = [&](Table& t) {
    std::lock_guard<std::mutex> lock(t.mutex);
    for (const auto& [key, count] : t.counts) {
      per_op[op_device(key.op, key.device)].add(model.price(key.work), count);
      if (key.work.priced_as_native) native[key.op] += count * key.work.launches;
    }
    if (auto it = t.folded.find(chip.name); it != t.folded.end()) {
      for (const auto& [op, priced] : it->second) {
        per_op[op] += priced;
        if (priced.priced_as_native > 0) native[uint32_t(op >> 32)] += priced.priced_as_native;
      }
    } else if (!t.folded.empty()) {
      TORCH_CHECK(false, "The ledger of this run was folded for the known chips only (it holds "
                  "more than ", kMaxEntries, " distinct launches); '", chip.name,
                  "' cannot be priced after the fact. Reset torchtpu.metrics more often.");
    }
  };
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    add_table(r.retired);
    for (auto& t : r.tables) add_table(*t);
  }
  LedgerTotals out;
  for (auto& [op_dev, priced] : per_op) {
    out.all += priced;
    out.per_op[names().name(uint32_t(op_dev >> 32))] += priced;
    out.per_device[int32_t(uint32_t(op_dev))] += priced;
  }
  for (auto& [op, n] : native) out.priced_as_native.emplace(names().name(op), n);
  return out;
}

void ledger_reset() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto clear = [](Table& t) {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.counts.clear();
    t.folded.clear();
  };
  clear(r.retired);
  for (auto& t : r.tables) clear(*t);
  Clocks& k = clocks();
  std::lock_guard<std::mutex> lock_clocks(k.mutex);
  k.devices.clear();  // the clocks start again at 0 (collectives in flight: forgotten)
  k.collective_end.clear();
  k.events.clear();
}

void set_tracing(bool on) { g_tracing.store(on); }
bool tracing() { return g_tracing.load(); }

std::vector<TraceEvent> take_trace() {
  std::lock_guard<std::mutex> lock(g_trace_mutex);
  std::vector<TraceEvent> out;
  out.swap(g_trace);
  return out;
}

std::shared_ptr<std::atomic<int64_t>> take_host_time_slot(const std::string& name) {
  std::shared_ptr<std::atomic<int64_t>> slot = std::move(tls_last_slot);
  tls_last_slot = nullptr;
  if (!slot || tls_last_traced != name) return nullptr;
  return slot;
}

void push_correlation(uint64_t id) { tls_correlation.push_back(id); }
void pop_correlation() {
  if (!tls_correlation.empty()) tls_correlation.pop_back();
}

}  // namespace torchtpu::sim
