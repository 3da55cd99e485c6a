// Lowering of the pending graph: the plan cache, and run_graph, which plans a graph (or finds its
// cached plan) and executes it (Plan.h, docs/design.md 3.1); compiled programs, the graphs of
// torch.compile lowered through the same plan and replayed without dispatch (Program.h, 3.2).
#include "defer/Defer.h"
#include "defer/Graph.h"
#include "defer/Plan.h"
#include "defer/Program.h"
#include "runtime/Env.h"
#include "runtime/Metrics.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/hash.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <fstream>
#include <tuple>
#include <list>
#include <mutex>
#include <unordered_map>

namespace torchtpu::defer {
namespace {


// The plan cache: keyed by a 128-bit hash of the graph's structure (Plan.h: everything a plan
// depends on) with the record-time fingerprint of the non-tensor arguments mixed in; a hit is
// checked against the stored structure (a collision is a miss, counted), and the least recently
// used plan goes when the cache is full (TORCHTPU_DEFER_PLAN_CACHE plans, default 4096).

struct PlanKey {
  uint64_t lo = 0, hi = 0;
  bool operator==(const PlanKey& o) const { return lo == o.lo && hi == o.hi; }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi >> 1)); }
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// (Two cheap lanes, each finalized once: a collision only costs a miss, since a hit is checked
// against the stored structure.)
PlanKey hash_structure(const std::vector<int64_t>& structure) {
  uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
  for (int64_t v : structure) {
    a = (a ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
    b = (b + static_cast<uint64_t>(v)) * 0x9e3779b97f4a7c15ULL;
    b ^= b >> 29;
  }
  return PlanKey{mix(a), mix(b ^ structure.size())};
}

// What a plan depends on, as integers: per node its op, capture, place, fusion facts and shape,
// per operand and result its storage key, geometry, dtype and access; liveness of every pending
// storage; the record-time fingerprint of the arguments.
// Written into `out` (cleared; its capacity kept from one graph to the next).
void structure_of(const std::vector<Node>& nodes, const Keys& keys,
                  const std::vector<char>& alive_keys, uint64_t fingerprint,
                  std::vector<int64_t>& out) {
  out.clear();
  out.reserve(nodes.size() * 24 + alive_keys.size() + 2);
  out.push_back(static_cast<int64_t>(fingerprint));
  auto operand = [&](const Operand& o, int key) {
    out.push_back(key);
    if (!o.defined()) return;
    out.push_back(static_cast<int64_t>(o.dtype) | (int64_t(o.read) << 8) |
                  (int64_t(o.written) << 9) | (int64_t(o.conj) << 10) | (int64_t(o.neg) << 11));
    out.push_back(o.offset);
    out.push_back(static_cast<int64_t>(o.sizes.size()));
    out.insert(out.end(), o.sizes.begin(), o.sizes.end());
    out.insert(out.end(), o.strides.begin(), o.strides.end());
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    out.push_back(reinterpret_cast<int64_t>(&n.op.schema()));
    out.push_back(static_cast<int64_t>(n.capture) | (int64_t(n.elementwise) << 8) |
                  (int64_t(n.checks_values) << 9));
    out.push_back(place_of(n));
    out.push_back(static_cast<int64_t>(n.shape.size()));
    out.insert(out.end(), n.shape.begin(), n.shape.end());
    out.push_back(static_cast<int64_t>(n.operands.size()));
    for (size_t j = 0; j < n.operands.size(); ++j) operand(n.operands[j], keys.operands[i][j]);
    out.push_back(static_cast<int64_t>(n.results.size()));
    for (size_t j = 0; j < n.results.size(); ++j) operand(n.results[j], keys.results[i][j]);
  }
  for (char a : alive_keys) out.push_back(a);
}

struct Cache {
  struct Entry {
    PlanKey key;
    std::vector<int64_t> structure;
    std::shared_ptr<Plan> plan;
    PlanCacheEntry stats;  // (reads count the planning, as TorchTPU counts a compilation)
  };
  // torch.tpu._set_allow_cache(False): every graph is planned anew and nothing is kept;
  // _set_cache_only(True): a graph whose plan is not cached raises instead of being planned;
  // _set_dump_on_cache_miss(True): the IR of each new plan goes to standard error.
  bool allow = true;
  bool only = false;
  bool dump_on_miss = false;
  std::mutex mutex;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index;
  size_t capacity = static_cast<size_t>(
      std::max<int64_t>(1, runtime::env::get_int("TORCHTPU_DEFER_PLAN_CACHE").value_or(4096)));
  std::string dump_path = [] {
    const char* v = std::getenv("TORCHTPU_DUMP_REGIONS");
    return v == nullptr ? std::string() : std::string(v);
  }();

  // The plan of `structure`, or null. Caller holds the mutex.
  std::shared_ptr<Plan> find(const PlanKey& key, const std::vector<int64_t>& structure) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    if (it->second->structure != structure) {
      TORCHTPU_COUNT("defer.cache_collisions");
      return nullptr;
    }
    lru.splice(lru.begin(), lru, it->second);
    it->second->stats.reads += 1;
    it->second->stats.last_read = std::chrono::system_clock::now();
    return it->second->plan;
  }
  void insert(const PlanKey& key, std::vector<int64_t> structure, std::shared_ptr<Plan> plan,
              int64_t planning_ns) {
    if (auto it = index.find(key); it != index.end()) {
      lru.erase(it->second);
      index.erase(it);
    }
    while (lru.size() >= capacity) {
      index.erase(lru.back().key);
      lru.pop_back();
      TORCHTPU_COUNT("defer.cache_evictions");
    }
    lru.push_front(Entry{key, std::move(structure), std::move(plan),
                         PlanCacheEntry{1, planning_ns, std::chrono::system_clock::now()}});
    index[key] = lru.begin();
  }
};

Cache& cache() {
  static auto* c = new Cache();
  return *c;
}

// The plan of a graph: the cached one, or built by the passes and cached.
std::shared_ptr<Plan> plan_of(const std::vector<Node>& nodes, const Keys& keys,
                              const std::vector<char>& alive_keys, uint64_t fingerprint,
                              const char* planned_for, const PlanOptions& options) {
  thread_local std::vector<int64_t> structure;  // (the common case, a hit, allocates nothing)
  structure_of(nodes, keys, alive_keys, fingerprint, structure);
  structure.push_back(options.pin_allocations);  // (a program's plan is not an eager graph's)
  const PlanKey key = hash_structure(structure);
  std::shared_ptr<Plan> plan;
  Cache& c = cache();
  bool allow = true;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    allow = c.allow;
    if (allow) plan = c.find(key, structure);
    TORCH_CHECK(plan != nullptr || !c.only,
                "torch.tpu._set_cache_only(True) is in force and the plan of this graph (",
                planned_for, ", ", nodes.size(),
                " recorded ops) is not in the cache: run the program once without cache-only "
                "to plan it, or call torch.tpu._set_cache_only(False)");
  }
  if (plan) {
    TORCHTPU_COUNT("defer.cache_hits");
  } else {
    TORCHTPU_COUNT("defer.cache_misses");
    std::vector<int64_t> kept = structure;  // (the thread's buffer is not held across planning)
    const auto t0 = std::chrono::steady_clock::now();
    plan = build_plan(nodes, keys, alive_keys, options);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    TORCHTPU_COUNT("defer.compiles");
    if (plan->replans) TORCHTPU_COUNT("defer.replans", plan->replans);
    TORCHTPU_COUNT("defer.compile_ns", ns);
    std::lock_guard<std::mutex> lock(c.mutex);
    if (allow) c.insert(key, std::move(kept), plan, ns);
    if (c.dump_on_miss) std::cerr << "# plan cache miss: " << planned_for << "\n" << plan->ir << "\n";
    if (!c.dump_path.empty()) {
      std::ofstream out(c.dump_path, std::ios::app);
      out << "# " << planned_for << "\n" << plan->ir << "\n";
    }
  }
  return plan;
}

std::vector<char> alive_keys_of(const Keys& keys) {
  std::vector<char> alive_keys(keys.pending.size());
  for (size_t k = 0; k < keys.pending.size(); ++k) alive_keys[k] = alive(*keys.pending[k]);
  return alive_keys;
}

void count_graph(const Plan& plan) {
  TORCHTPU_COUNT("defer.graphs");
  TORCHTPU_COUNT("defer.regions", static_cast<int64_t>(plan.regions.size()));
  int64_t eliminated = 0;
  for (char l : plan.live) eliminated += !l;
  if (eliminated) TORCHTPU_COUNT("defer.ops_eliminated", eliminated);
}

}  // namespace

void run_graph(std::vector<Node> nodes, uint64_t fingerprint, runtime::FlushReason reason) {
  const auto start = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point start;
    ~Timer() {
      TORCHTPU_COUNT("defer.flush_host_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
    }
  } timer{start};
  const Keys keys = keys_of(nodes);
  const std::vector<char> alive_keys = alive_keys_of(keys);
  const std::string why = std::string("flushed by: ") + runtime::policy(reason).label;
  std::shared_ptr<Plan> plan = plan_of(nodes, keys, alive_keys, fingerprint, why.c_str(),
                                       PlanOptions::from_environment());
  count_graph(*plan);
  const bool blocking = runtime::policy(reason).host_waits;
  execute(nodes, keys, *plan, alive_keys, blocking);
}

void set_dump_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().dump_path = path;
}

std::string cached_plans_text() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  std::string out;
  for (const auto& entry : cache().lru) out += entry.plan->ir + "\n";
  return out;
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  cache().lru.clear();
  cache().index.clear();
}

std::vector<PlanCacheEntry> plan_cache_entries() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  std::vector<PlanCacheEntry> out;
  for (const auto& entry : cache().lru) out.push_back(entry.stats);
  return out;
}

void set_plan_cache_policy(std::optional<bool> allow, std::optional<bool> only,
                           std::optional<bool> dump_on_miss) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (allow) cache().allow = *allow;
  if (only) cache().only = *only;
  if (dump_on_miss) cache().dump_on_miss = *dump_on_miss;
}

bool plan_cache_dumps_on_miss() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().dump_on_miss;
}

// ---------------------------------------------------------------------------------------------
// Compiled programs (Program.h)

struct Program {
  std::string name;
  mutable std::mutex mutex;         // one run at a time (its nodes are bound while it runs)
  std::vector<Node> nodes;          // the captured ops; operands are slots, bound at each run
  Keys keys;                        // keys.pending: the fresh values of the run in progress
  std::shared_ptr<Plan> plan;
  std::vector<char> alive;          // per value (pending key): an output of the graph
  std::vector<std::pair<c10::Device, size_t>> values;  // per value: its device and bytes
  struct Input {
    bool tensor = false;
    c10::Device device{c10::kPrivateUse1, 0};
    Operand geometry;
    size_t storage_bytes = 0;
    int same_storage_as = -1;  // the first input over the same storage, when not this one
  };
  std::vector<Input> inputs;
  std::vector<int> external_input;      // per external key (-key - 1): its input, or -1
  std::vector<c10::Storage> constants;  // per external key bound to no input: its storage
  struct Output {
    enum class Kind { none, value, input, constant } kind = Kind::none;
    int index = -1;          // the value or the input
    c10::Storage constant;   // Kind::constant
    Operand geometry;
  };
  std::vector<Output> outputs;
  c10::Device device{c10::kPrivateUse1, 0};
  c10::StreamId stream = 0;
  // The float32 matmul precision its matmuls were recorded at: a call at another precision
  // captures another program (Dynamo's guards do not see it).
  sim::Precision precision = sim::Precision::kHighest;
  int64_t runs = 0;
  double estimated_seconds = 0;  // charged per run (the bucket's, when charged as its bucket)
  sim::Estimate estimate;        // the last run's own estimate, as one launch
  std::optional<sim::Estimate> charge;  // end_program(charged_as): its bucket's estimate
  std::string charged_as;
  // Intermediates kept in VMEM (vmem_intermediates): HBM bytes a run does not move, and the
  // most VMEM they hold at once.
  double vmem_kept_bytes = 0;
  int64_t vmem_peak_bytes = 0;
};

namespace {

// For each input, the first input over the same storage (-1: itself or not a tensor).
std::vector<int> storage_sharing(const std::vector<at::Tensor>& inputs) {
  std::vector<int> out(inputs.size(), -1);
  std::unordered_map<const c10::StorageImpl*, int> first;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    auto [it, fresh] = first.emplace(inputs[i].storage().unsafeGetStorageImpl(), int(i));
    if (!fresh) out[i] = it->second;
  }
  return out;
}

bool inputs_match(const Program& p, const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != p.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Program::Input& in = p.inputs[i];
    const at::Tensor& t = inputs[i];
    if (t.defined() != in.tensor) return false;
    if (!in.tensor) continue;
    const Operand& g = in.geometry;
    if (t.device() != in.device || t.scalar_type() != g.dtype ||
        t.sizes() != c10::IntArrayRef(g.sizes) || t.strides() != c10::IntArrayRef(g.strides) ||
        t.storage_offset() != g.offset || t.is_conj() != g.conj || t.is_neg() != g.neg ||
        t.storage().nbytes() < in.storage_bytes) {
      return false;
    }
  }
  const std::vector<int> sharing = storage_sharing(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (sharing[i] != p.inputs[i].same_storage_as) return false;
  }
  return true;
}

template <typename F>
void for_each_slot(Program& p, F&& f) {
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    Node& n = p.nodes[i];
    for (size_t j = 0; j < n.operands.size(); ++j) f(n.operands[j], p.keys.operands[i][j]);
    for (size_t j = 0; j < n.results.size(); ++j) f(n.results[j], p.keys.results[i][j]);
  }
}

// Intermediates in VMEM (the cost of a program, docs/compiled-mode.md): a value the program makes
// and consumes itself (not an output) that takes HBM in the plan stays in the chip's VMEM when it
// fits next to the other intermediates held there at the time: in region order, a value is
// placed when its first region runs (if it fits) and freed after its last; each region that
// reads or writes a placed value moves its bytes between VMEM and the units instead of HBM.
// Returns the HBM bytes kept per run and the peak VMEM held.
std::pair<double, int64_t> vmem_intermediates(const std::vector<Node>& nodes, const Keys& keys,
                                               const Plan& plan, const std::vector<char>& alive,
                                               int64_t vmem_bytes) {
  const size_t P = keys.pending.size();
  std::vector<int> first(P, -1);
  std::vector<double> bytes(P, 0);
  std::vector<int> regions_touching(P, 0);
  std::vector<int> seen_in(P, -1);
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    for (int i : plan.regions[r].nodes) {
      if (!plan.live[i]) continue;
      for_each_access(nodes, keys, static_cast<size_t>(i), [&](const Operand& o, int key) {
        if (key < 0 || alive[key] || !plan.memory[key]) return;
        if (first[key] < 0) {
          first[key] = static_cast<int>(r);
          bytes[key] = sim::CostModel::padded_bytes(o.sizes, static_cast<int>(c10::elementSize(o.dtype)));
        }
        if (seen_in[key] != static_cast<int>(r)) {
          seen_in[key] = static_cast<int>(r);
          ++regions_touching[key];
        }
      });
    }
  }
  std::vector<char> placed(P, 0);
  double kept = 0, held = 0, peak = 0;
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    for (size_t k = 0; k < P; ++k) {
      if (first[k] == static_cast<int>(r) && held + bytes[k] <= static_cast<double>(vmem_bytes)) {
        placed[k] = 1;
        held += bytes[k];
        kept += bytes[k] * regions_touching[k];
      }
    }
    peak = std::max(peak, held);
    for (size_t k = 0; k < P; ++k) {
      if (placed[k] && plan.last_region[k] == static_cast<int>(r)) held -= bytes[k];
    }
  }
  return {kept, static_cast<int64_t>(peak)};
}

// Turns the captured operands into slots: no value, input or constant is held between runs.
void unbind(Program& p) {
  for_each_slot(p, [](Operand& o, int key) {
    if (key >= 0) {
      o.pending.reset();
    } else if (key != INT32_MIN) {
      o.tensor.reset();
    }
  });
  p.keys.pending.clear();
}

}  // namespace

namespace {
std::optional<std::vector<at::Tensor>> run_program(Program& p,
                                                   const std::vector<at::Tensor>& inputs,
                                                   bool counted);
}  // namespace

Captured lower_program(std::vector<Node> nodes, uint64_t fingerprint,
                       const std::vector<at::Tensor>& inputs,
                       const std::vector<at::Tensor>& outputs, const std::string& name,
                       bool bucket, const Program* charged_as) {
  const NoPythonDispatch no_python;
  auto prog = std::make_shared<Program>();
  Program& p = *prog;
  p.name = name;
  p.precision = sim::current_precision();
  p.keys = keys_of(nodes);
  p.alive = alive_keys_of(p.keys);
  auto fail = [&](const std::string& why) {
    // The recorded ops run as fused eager runs them.
    const aten::KernelScope scope;
    run_graph(std::move(nodes), fingerprint, runtime::FlushReason::compiled_graph);
    return Captured{nullptr, {}, why};
  };
  if (!nodes.empty()) {
    p.device = nodes[0].device;
    p.stream = nodes[0].stream;
    for (const Node& n : nodes) {
      if (n.device != p.device || n.stream != p.stream) return fail("ops on several streams");
    }
  }
  // Inputs.
  const std::vector<int> sharing = storage_sharing(inputs);
  std::unordered_map<const c10::StorageImpl*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Program::Input in;
    const at::Tensor& t = inputs[i];
    if (t.defined()) {
      if (!t.device().is_privateuseone()) return fail("a CPU tensor input");
      in.tensor = true;
      in.device = t.device();
      in.geometry = operand_geometry(t);
      in.storage_bytes = t.storage().nbytes();
      in.same_storage_as = sharing[i];
      input_of.emplace(t.storage().unsafeGetStorageImpl(), static_cast<int>(i));
    }
    p.inputs.push_back(std::move(in));
  }
  // Outputs.
  std::unordered_map<uint64_t, int> value_of;
  for (size_t k = 0; k < p.keys.pending.size(); ++k) value_of[p.keys.pending[k]->id] = int(k);
  std::vector<char> is_output(p.keys.pending.size(), 0);
  for (const at::Tensor& t : outputs) {
    Program::Output out;
    if (t.defined()) {
      if (!t.device().is_privateuseone()) return fail("a CPU tensor output");
      out.geometry = operand_geometry(t);
      const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
      if (auto record = pending_of(t.storage())) {
        auto it = value_of.find(record->id);
        if (it == value_of.end()) return fail("an output made outside the graph");
        out.kind = Program::Output::Kind::value;
        out.index = it->second;
        is_output[it->second] = 1;
      } else if (auto it = input_of.find(impl); it != input_of.end()) {
        out.kind = Program::Output::Kind::input;
        out.index = it->second;
      } else {
        out.kind = Program::Output::Kind::constant;
        out.constant = t.storage();
      }
    }
    p.outputs.push_back(std::move(out));
  }
  for (size_t k = 0; k < p.alive.size(); ++k) {
    if (p.alive[k] && !is_output[k]) {
      return fail("a value the graph makes is referenced outside its outputs");
    }
  }
  // Externals: graph inputs, or constants (tensors the graph holds).
  for (size_t i = 0; i < nodes.size(); ++i) {
    for_each_access(nodes, p.keys, i, [&](const Operand& o, int key) {
      if (key >= 0 || key == INT32_MIN) return;
      const size_t e = static_cast<size_t>(-key - 1);
      if (e < p.external_input.size()) return;
      p.external_input.resize(e + 1, -1);
      p.constants.resize(e + 1);
      auto it = input_of.find(o.tensor.storage().unsafeGetStorageImpl());
      if (it != input_of.end()) {
        p.external_input[e] = it->second;
      } else {
        p.constants[e] = o.tensor.storage();
      }
    });
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = 0; j < nodes[i].operands.size(); ++j) {
      const int key = p.keys.operands[i][j];
      if (nodes[i].operands[j].written && key < 0 && key != INT32_MIN &&
          p.external_input[-key - 1] < 0) {
        return fail("the graph writes a tensor that is not an input (" + *nodes[i].name + ")");
      }
    }
  }
  PlanOptions options = PlanOptions::from_environment();
  options.pin_allocations = false;  // (Plan.h)
  p.plan = nodes.empty() ? std::make_shared<Plan>()
                         : plan_of(nodes, p.keys, p.alive, fingerprint,
                                   ("compiled program " + name).c_str(), options);
  for (const auto& record : p.keys.pending) p.values.emplace_back(record->device, record->nbytes);
  std::tie(p.vmem_kept_bytes, p.vmem_peak_bytes) = vmem_intermediates(
      nodes, p.keys, *p.plan, p.alive, sim::cost_model().chip().vmem_bytes);
  p.nodes = std::move(nodes);
  unbind(p);
  if (charged_as != nullptr) {
    std::lock_guard<std::mutex> lock(charged_as->mutex);
    p.charge = charged_as->estimate;
    p.charged_as = charged_as->name;
  }
  if (bucket) {
    TORCHTPU_COUNT("compile.bucket_programs");
  } else {
    TORCHTPU_COUNT("compile.programs");
    TORCHTPU_COUNT("compile.program_ops", static_cast<int64_t>(p.nodes.size()));
  }
  auto outs = run_program(p, inputs, /*counted=*/!bucket);
  TORCH_INTERNAL_ASSERT(outs.has_value(), "a compiled program does not take its own inputs");
  return Captured{std::move(prog), std::move(*outs), {}};
}

std::optional<std::vector<at::Tensor>> run_program(Program& p,
                                                   const std::vector<at::Tensor>& inputs) {
  return run_program(p, inputs, /*counted=*/true);
}

namespace {
// `counted`: a run of the user's (a bucket program's first run, which prices the bucket, is not).
std::optional<std::vector<at::Tensor>> run_program(Program& p,
                                                   const std::vector<at::Tensor>& inputs,
                                                   bool counted) {
  const NoPythonDispatch no_python;
  if (!inputs_match(p, inputs) || sim::current_precision() != p.precision ||
      (!p.nodes.empty() && runtime::current_stream(p.device.index()).id() != p.stream)) {
    TORCHTPU_COUNT("compile.program_mismatches");
    return std::nullopt;
  }
  // Eager work recorded before the call runs first; inputs still pending get their memory.
  flush(runtime::FlushReason::compiled_graph);
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (auto record = pending_of(t.storage())) materialize(*record);
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  // Bind the slots: fresh values (outputs are pending storages the executor gives memory),
  // inputs and constants.
  const size_t values = p.values.size();
  std::vector<c10::Storage> output_storage(values);
  p.keys.pending.resize(values);
  for (size_t k = 0; k < values; ++k) {
    const auto [device, nbytes] = p.values[k];
    if (p.alive[k]) {
      auto made = make_pending_storage(device, nbytes);
      p.keys.pending[k] = std::move(made.first);
      output_storage[k] = std::move(made.second);
    } else {
      auto record = std::make_shared<PendingStorage>();
      record->device = device;
      record->nbytes = nbytes;
      record->dead.store(true);  // (an intermediate: memory of the run, released in it)
      p.keys.pending[k] = std::move(record);
    }
  }
  std::vector<c10::Storage> externals(p.external_input.size());
  for (size_t e = 0; e < externals.size(); ++e) {
    externals[e] = p.external_input[e] >= 0 ? inputs[p.external_input[e]].storage()
                                            : p.constants[e];
  }
  struct Unbind {
    Program& p;
    ~Unbind() { unbind(p); }
  } unbind_after{p};
  for_each_slot(p, [&](Operand& o, int key) {
    if (key >= 0) {
      o.pending = p.keys.pending[key];
    } else if (key != INT32_MIN) {
      o.tensor = device_view(externals[-key - 1], o);
    }
  });
  sim::Estimate e;
  {
    sim::RecordCollector collect;   // every launch of the program's regions ...
    const aten::KernelScope scope;  // (the kernels run for real, not recorded)
    execute(p.nodes, p.keys, *p.plan, p.alive, /*blocking=*/false);
    e = collect.total;
  }
  if (!p.nodes.empty()) {
    // ... charged as one launch, without the HBM traffic of its intermediates kept in VMEM.
    sim::Work w = e.work;
    w.hbm_bytes = std::max(0.0, w.hbm_bytes - p.vmem_kept_bytes);
    w.launches = 1;
    p.estimate = sim::cost_model().price(w);
    const sim::Estimate& charged = p.charge ? *p.charge : p.estimate;
    p.estimated_seconds = charged.seconds();
    if (p.charge) {
      TORCHTPU_COUNT("compile.padding_ns",
                     static_cast<int64_t>((charged.seconds() - p.estimate.seconds()) * 1e9));
    }
    sim::record("compiled::" + p.name, charged);
  }
  if (counted) {
    ++p.runs;
    TORCHTPU_COUNT("compile.program_runs");
  }
  std::vector<at::Tensor> outs(p.outputs.size());
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const Program::Output& o = p.outputs[i];
    switch (o.kind) {
      case Program::Output::Kind::none: break;
      case Program::Output::Kind::value:
        outs[i] = device_view(output_storage[o.index], o.geometry);
        break;
      case Program::Output::Kind::input:
        outs[i] = device_view(inputs[o.index].storage(), o.geometry);
        break;
      case Program::Output::Kind::constant:
        outs[i] = device_view(o.constant, o.geometry);
        break;
    }
  }
  return outs;
}
}  // namespace

void charge_run(const Program& p) {
  sim::Estimate e;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    e = p.charge ? *p.charge : p.estimate;
  }
  sim::record("compiled::" + p.name, e);
  TORCHTPU_COUNT("compile.runs_charged_as_bucket");
}

ProgramInfo program_info(const Program& p) {
  ProgramInfo info;
  info.name = p.name;
  info.ops = static_cast<int64_t>(p.nodes.size());
  info.regions = static_cast<int64_t>(p.plan->regions.size());
  for (const Region& r : p.plan->regions) info.fused_regions += r.fused;
  for (char l : p.plan->live) info.ops_eliminated += !l;
  info.runs = p.runs;
  info.estimated_seconds = p.estimated_seconds;
  info.own_seconds = p.estimate.seconds();
  info.charged_as = p.charged_as;
  info.vmem_kept_bytes = p.vmem_kept_bytes;
  info.vmem_peak_bytes = p.vmem_peak_bytes;
  info.ir = p.plan->ir;
  return info;
}

}  // namespace torchtpu::defer
