// Compiled programs (Program.h), capture and replay in one place. begin_program() makes this
// thread record every op into the pending graph, whatever the eager mode; end_program() takes the
// recorded ops and lowers them into a program (lower_program: its inputs, outputs and constants
// as slots, its plan from the plan cache); run_program() replays it.
#include "defer/Defer.h"
#include "defer/Plan.h"
#include "defer/Program.h"
#include "defer/Recording.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace torchtpu::defer {

using runtime::FlushReason;

thread_local bool t_capturing = false;  // this thread captures a program (records in any mode)

// The capture cannot become a program: its graph will run op by op. The capturing thread stops
// recording in a mode where it would not (caller holds the mutex).
void fail_capture(State& s, const std::string& why) {
  if (!s.capture.active) return;
  if (s.capture.failure.empty()) s.capture.failure = why;
  if (std::this_thread::get_id() == s.capture.owner) t_capturing = false;
}

namespace {

bool capture_owner(const State& s) {
  return s.capture.active && std::this_thread::get_id() == s.capture.owner;
}

// fail_capture() before an op that runs at once: what the capture recorded runs first, so that
// random numbers are drawn in program order (a recorded random op draws when its graph runs).
void fail_capture_and_flush(State& s, const std::string& why) {
  fail_capture(s, why);
  if (!s.nodes.empty()) flush_locked(s, runtime::FlushReason::compiled_graph);
}

}  // namespace

// An op of a graph being captured that runs at once instead of being recorded (a factory whose
// size its out= kernel decides, such as arange; an op without a meta kernel; a host read of a
// constant) is folded into the program as a constant when it reads no graph input and nothing
// pending: its result is the same at every call. Otherwise the capture fails. (Random ops fail
// before: their numbers are not constants.) The program later refuses to write a constant.
void fold_or_fail(State& s, const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  const std::string& why, bool random) {
  const size_t num_args = op.schema().arguments().size();
  torch::jit::Stack args(stack.end() - num_args, stack.end());
  auto lock = runtime::lock_without_gil(s.mutex);
  bool reads_input = random;  // (random numbers are never constants)
  for_each_tensor_slot(args, [&](at::Tensor& t) {
    if (!t.defined() || t.is_cpu() || reads_input) return;
    reads_input = s.capture.inputs.count(t.storage().unsafeGetStorageImpl()) > 0 ||
                  pending_of(t.storage()) != nullptr;
  });
  if (reads_input) {
    fail_capture_and_flush(s, why);
  } else if (s.capture.active) {
    ++s.capture.folded;
    runtime::metrics::count("compile.program_folded." + why);
  }
}

bool capturing_program() { return t_capturing; }

bool begin_program(const std::vector<at::Tensor>& inputs) {
  State& s = state();
  if (t_capturing) return false;
  auto lock = runtime::lock_without_gil(s.mutex);
  if (s.capture.active) return false;  // (a capture of this or another thread)
  if (!s.nodes.empty()) {
    // The eager work recorded before the graph runs first: the program starts from real memory.
    note_materialization(FlushReason::compiled_graph, {}, {});
    flush_locked(s, FlushReason::compiled_graph);
  }
  s.capture.active = true;
  s.capture.owner = std::this_thread::get_id();
  s.capture.failure.clear();
  s.capture.inputs.clear();
  for (const at::Tensor& t : inputs) {
    if (t.defined()) s.capture.inputs.insert(t.storage().unsafeGetStorageImpl());
  }
  s.capture.folded = 0;
  t_capturing = true;
  return true;
}

namespace {
// Ends the capture; the recorded nodes when it can become a program, else runs them (failure).
std::optional<std::pair<std::vector<Node>, uint64_t>> take_capture(State& s,
                                                                   std::string& failure) {
  auto lock = runtime::lock_without_gil(s.mutex);
  t_capturing = false;
  s.capture.active = false;
  failure = std::move(s.capture.failure);
  s.capture.failure.clear();
  s.capture.inputs.clear();
  if (s.capture.folded > 0 && failure.empty()) {
    TORCHTPU_COUNT("compile.program_ops_folded", s.capture.folded);
  }
  if (!failure.empty()) {
    // What was recorded runs as fused eager runs it (at once in the other modes).
    if (!s.nodes.empty()) {
      note_materialization(FlushReason::compiled_graph, {}, {});
      flush_locked(s, FlushReason::compiled_graph);
    }
    return std::nullopt;
  }
  auto taken = take_nodes(s);
  update_any_pending(s);
  return taken;
}
}  // namespace

Captured end_program(const std::vector<at::Tensor>& inputs,
                     const std::vector<at::Tensor>& outputs, const std::string& name,
                     bool bucket, const Program* charged_as) {
  State& s = state();
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    TORCH_INTERNAL_ASSERT(capture_owner(s), "end_program() without begin_program() on this thread");
  }
  std::string failure;
  auto captured = take_capture(s, failure);
  if (!captured) return Captured{nullptr, {}, failure};
  return lower_program(std::move(captured->first), captured->second, inputs, outputs, name,
                       bucket, charged_as);
}

void abort_program() {
  std::string failure;
  {
    auto lock = runtime::lock_without_gil(state().mutex);
    if (!capture_owner(state())) return;
    fail_capture(state(), "an error inside the graph");
  }
  take_capture(state(), failure);
}

// ---------------------------------------------------------------------------------------------
// The program: a captured graph planned once (through the plan cache, Lowering.cpp) and replayed

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

namespace {

using InputOf = std::unordered_map<const c10::StorageImpl*, int>;  // storage -> graph input

// Each step of lowering below returns why the graph cannot become a program, or nothing.

// A program runs on one device and stream: those of its ops.
std::optional<std::string> bind_place(Program& p, const std::vector<Node>& nodes) {
  if (!nodes.empty()) {
    p.device = nodes[0].device;
    p.stream = nodes[0].stream;
    for (const Node& n : nodes) {
      if (n.device != p.device || n.stream != p.stream) return "ops on several streams";
    }
  }
  return std::nullopt;
}

// The inputs: the geometry, device, bytes and storage sharing a replay's inputs must match.
std::optional<std::string> bind_inputs(Program& p, const std::vector<at::Tensor>& inputs,
                                       InputOf& input_of) {
  const std::vector<int> sharing = storage_sharing(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Program::Input in;
    const at::Tensor& t = inputs[i];
    if (t.defined()) {
      if (!t.device().is_privateuseone()) return "a CPU tensor input";
      in.tensor = true;
      in.device = t.device();
      in.geometry = operand_geometry(t);
      in.storage_bytes = t.storage().nbytes();
      in.same_storage_as = sharing[i];
      input_of.emplace(t.storage().unsafeGetStorageImpl(), static_cast<int>(i));
    }
    p.inputs.push_back(std::move(in));
  }
  return std::nullopt;
}

// The outputs: a value the graph makes, an input, or a constant; every value still referenced
// must be an output.
std::optional<std::string> bind_outputs(Program& p, const std::vector<at::Tensor>& outputs,
                                        const InputOf& input_of) {
  std::unordered_map<uint64_t, int> value_of;
  for (size_t k = 0; k < p.keys.pending.size(); ++k) value_of[p.keys.pending[k]->id] = int(k);
  std::vector<char> is_output(p.keys.pending.size(), 0);
  for (const at::Tensor& t : outputs) {
    Program::Output out;
    if (t.defined()) {
      if (!t.device().is_privateuseone()) return "a CPU tensor output";
      out.geometry = operand_geometry(t);
      const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
      if (auto record = pending_of(t.storage())) {
        auto it = value_of.find(record->id);
        if (it == value_of.end()) return "an output made outside the graph";
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
      return "a value the graph makes is referenced outside its outputs";
    }
  }
  return std::nullopt;
}

// Externals: graph inputs, or constants (tensors the graph holds), which the graph never writes.
std::optional<std::string> bind_externals(Program& p, const std::vector<Node>& nodes,
                                          const InputOf& input_of) {
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
        return "the graph writes a tensor that is not an input (" + *nodes[i].name + ")";
      }
    }
  }
  return std::nullopt;
}

// The plan (from the plan cache, without pinning: Plan.h), the values' sizes, the intermediates
// kept in VMEM; the nodes become the program's, their operands slots.
void plan_program(Program& p, std::vector<Node> nodes, uint64_t fingerprint) {
  PlanOptions options = PlanOptions::from_environment();
  options.pin_allocations = false;  // (Plan.h)
  p.plan = nodes.empty() ? std::make_shared<Plan>()
                         : plan_of(nodes, p.keys, p.alive, fingerprint,
                                   ("compiled program " + p.name).c_str(), options);
  for (const auto& record : p.keys.pending) p.values.emplace_back(record->device, record->nbytes);
  std::tie(p.vmem_kept_bytes, p.vmem_peak_bytes) = vmem_intermediates(
      nodes, p.keys, *p.plan, p.alive, sim::cost_model().chip().vmem_bytes);
  p.nodes = std::move(nodes);
  unbind(p);
}

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
  InputOf input_of;
  std::optional<std::string> failure = bind_place(p, nodes);
  if (!failure) failure = bind_inputs(p, inputs, input_of);
  if (!failure) failure = bind_outputs(p, outputs, input_of);
  if (!failure) failure = bind_externals(p, nodes, input_of);
  if (failure) {
    // The recorded ops run as fused eager runs them.
    const aten::KernelScope scope;
    run_graph(std::move(nodes), fingerprint, runtime::FlushReason::compiled_graph);
    return Captured{nullptr, {}, *failure};
  }
  plan_program(p, std::move(nodes), fingerprint);
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
