// Flush and materialization (Recording.h, Defer.h): the recorded nodes taken out of the pending
// graph and run (Lowering.cpp's run_graph), at the materialization points, each counted by
// reason and Python line; the pending graph as the runtime's DeferredWork.
#include "aten/Entry.h"
#include "defer/Defer.h"
#include "defer/Recording.h"
#include "runtime/DeferredWork.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"

#include <exception>
#include <functional>

namespace torchtpu::defer {

using runtime::FlushReason;

State& state() {
  static auto* s = new State();  // leaked: tensors may die after static destruction
  return *s;
}

void update_any_pending(State& s) {
  s.any_pending.store(!s.nodes.empty() || !s.registry.empty());
}

// Takes the recorded nodes and their fingerprint out of the pending graph (caller holds the
// mutex).
std::pair<std::vector<Node>, uint64_t> take_nodes(State& s) {
  std::vector<Node> nodes = std::move(s.nodes);
  s.nodes.clear();
  s.last_graph_size = nodes.size();
  const uint64_t fingerprint = s.fingerprint;
  s.fingerprint = 0;
  s.local_pending.clear();
  s.producer_shapes.clear();
  s.local_external.clear();
  return {std::move(nodes), fingerprint};
}

void flush_locked(State& s, FlushReason reason) {
  if (s.nodes.empty()) return;
  fail_capture(s, std::string("materialization: ") + runtime::policy(reason).label);
  auto [nodes, fingerprint] = take_nodes(s);
  // any_pending stays set until the graph is enqueued: a synchronization point of another thread
  // (an event record) that finds nothing pending must find the graph's work on the streams.
  struct Settle {
    State& s;
    ~Settle() { update_any_pending(s); }
  } settle{s};
  const aten::KernelScope scope;  // the kernels run for real, not recorded again
  const NoPythonDispatch no_python;
  run_graph(std::move(nodes), fingerprint, reason);
}

namespace {

// Does the op touch a storage that the pending graph uses?
bool touches_graph(State& s, torch::jit::Stack args) {
  bool touches = false;
  for_each_tensor_slot(args, [&](at::Tensor& t) {
    if (!t.defined() || touches) return;
    if (auto record = pending_of(t.storage())) {
      touches = s.local_pending.count(record->id) > 0;
    } else {
      touches = s.local_external.count(t.storage().unsafeGetStorageImpl()) > 0;
    }
  });
  return touches;
}

}  // namespace

// An op that runs now: first the pending work it depends on, then memory for its pending
// arguments.
void prepare_to_run(State& s, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    FlushReason reason, const std::string& name) {
  const size_t num_args = op.schema().arguments().size();
  torch::jit::Stack args(stack->end() - num_args, stack->end());
  bool touches;
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    touches = touches_graph(s, args);
  }
  if (touches) {
    const std::string location = current_location();
    auto lock = runtime::lock_without_gil(s.mutex);
    note_materialization(reason, name, location);
    flush_locked(s, reason);
  }
  for_each_tensor_slot(args, [&](at::Tensor& t) {
    if (!t.defined()) return;
    if (auto record = pending_of(t.storage())) materialize(*record);
  });
}

namespace {

// The pending graph as the runtime's DeferredWork (runtime/DeferredWork.h).
class PendingGraph final : public runtime::DeferredWork {
 public:
  void flush(FlushReason reason) override {
    if (aten::inside_kernel()) return;
    defer::flush(reason);
  }
  void materialize_all(FlushReason reason) override {
    if (aten::inside_kernel()) return;
    defer::materialize_all(reason);
  }
};

struct Installer {
  Installer() {
    static PendingGraph graph;
    runtime::register_deferred_work(&graph);
  }
} installer;

}  // namespace

void flush(FlushReason reason) {
  State& s = state();
  if (!s.any_pending.load()) return;
  auto lock = runtime::lock_without_gil(s.mutex);
  if (s.nodes.empty()) return;
  note_materialization(reason, {}, {});
  flush_locked(s, reason);
}

void materialize_all(FlushReason reason) {
  State& s = state();
  if (!s.any_pending.load()) return;
  const std::string location = current_location();  // (before the lock: it takes the GIL)
  auto lock = runtime::lock_without_gil(s.mutex);
  if (!s.nodes.empty()) {
    note_materialization(reason, {}, location);
    flush_locked(s, reason);
  }
  // A storage that cannot get memory (out of memory) raises here once, and leaves the registry
  // with the others: a later synchronization does not raise it again; an op that uses the
  // tensor tries again (and raises at that op).
  std::exception_ptr first_error;
  for (auto& [id, record] : s.registry) {
    try {
      materialize(*record);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  s.registry.clear();
  update_any_pending(s);
  if (first_error) std::rethrow_exception(first_error);
}

int64_t pending_ops() {
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  return static_cast<int64_t>(s.nodes.size());
}

void visit_recorded_nodes(const std::function<void(const std::vector<Node>&)>& f) {
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  f(s.nodes);
}

void note_materialization(FlushReason reason, const std::string& op,
                          const std::string& location) {
  static const runtime::metrics::Counter materializations("defer.materializations");
  materializations.add();
  const runtime::FlushPolicy& p = runtime::policy(reason);
  std::string label = p.names_op && !op.empty() ? std::string(p.label) + ": " + op : p.label;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  ++s.materializations[std::move(label)][location.empty() ? "<unknown>" : location];
}

std::map<std::string, std::map<std::string, int64_t>> materializations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  return s.materializations;
}

void reset_materializations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  s.materializations.clear();
}

}  // namespace torchtpu::defer
