// The collectives of "tpu_dist" as ops (Collectives.h, docs/distributed.md): their schemas, the
// process groups they run in, their PrivateUse1 kernels, the charge of a collective and the
// cross-rank check of its tensors.
#include "aten/Collectives.h"

#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include "pytorch/Internals.h"
#include <torch/library.h>

#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace torchtpu::aten {
namespace {

// ---------------------------------------------------------------------------------------------
// The process groups, by the id the Python group gave its Gloo backend.

struct Group {
  std::optional<c10::weak_intrusive_ptr<c10d::Backend>> backend;
  bool check = true;
  // Work.wait() of a recorded collective: the n-th kernel run of the group is the n-th
  // collective the group recorded (they run in program order), and its flight is kept here.
  uint64_t ran = 0;
  std::unordered_map<uint64_t, uint64_t> flights;  // sequence -> flight (sim/Ledger.h)
};

// Flights kept for waits that never come (a Work nobody waits for).
constexpr uint64_t kFlightsKept = 4096;

struct Groups {
  std::mutex mutex;
  std::unordered_map<int64_t, Group> by_id;
};

Groups& groups() {
  static auto* g = new Groups();  // leaked: kernels may run during static destruction
  return *g;
}

// A group's backend, held for one collective.
struct Held {
  c10::intrusive_ptr<c10d::Backend> backend;
  bool check = true;
};

Held hold(int64_t id) {
  Groups& g = groups();
  std::lock_guard<std::mutex> lock(g.mutex);
  auto it = g.by_id.find(id);
  TORCH_CHECK(it != g.by_id.end(), "tpu_dist: no process group ", id,
              " (a group's collectives take the id torchtpu.distributed gave it)");
  auto backend = it->second.backend->lock();
  TORCH_CHECK(backend, "tpu_dist: process group ", id, " was destroyed");
  return {std::move(backend), it->second.check};
}

// Charges a collective of a group's recorded op as it runs, keeping its flight for the wait.
void charge_recorded(int64_t group, const std::string& kind, double bytes, int64_t chips) {
  const uint64_t flight = charge_collective(kind, bytes, chips);
  Groups& g = groups();
  std::lock_guard<std::mutex> lock(g.mutex);
  Group& entry = g.by_id.at(group);
  const uint64_t sequence = entry.ran++;
  entry.flights[sequence] = flight;
  if (sequence >= kFlightsKept) entry.flights.erase(sequence - kFlightsKept);
}

// ---------------------------------------------------------------------------------------------
// The cross-rank check

std::string describe(const std::vector<at::Tensor>& tensors) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < tensors.size(); ++i) {
    s << (i ? ", " : "") << c10::toString(tensors[i].scalar_type()) << tensors[i].sizes();
  }
  s << "]";
  return s.str();
}

void check_same_on(c10d::Backend& backend, const std::string& kind,
                   const std::vector<at::Tensor>& tensors) {
  const int size = backend.getSize();
  if (size == 1) return;
  const std::string described = describe(tensors);
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a: the same on every rank
  for (const char c : described) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  at::Tensor mine = at::empty({2}, at::kLong);
  mine.data_ptr<int64_t>()[0] = static_cast<int64_t>(tensors.size());
  mine.data_ptr<int64_t>()[1] = static_cast<int64_t>(hash);
  std::vector<std::vector<at::Tensor>> everyone(1);
  for (int r = 0; r < size; ++r) everyone[0].push_back(at::empty({2}, at::kLong));
  std::vector<at::Tensor> in{mine};
  backend.allgather(everyone, in)->wait();
  std::vector<int64_t> differ;
  for (int r = 0; r < size; ++r) {
    const int64_t* theirs = everyone[0][r].data_ptr<int64_t>();
    if (theirs[0] != mine.data_ptr<int64_t>()[0] || theirs[1] != mine.data_ptr<int64_t>()[1]) {
      differ.push_back(r);
    }
  }
  TORCH_CHECK_VALUE(differ.empty(), "tpu_dist.", kind,
                    ": the ranks passed tensors of different shapes or dtypes; rank ",
                    backend.getRank(), " passed ", described, ", ranks ", differ,
                    " passed others. Every rank must pass tensors of the same shapes and dtypes "
                    "to this collective.");
}

// ---------------------------------------------------------------------------------------------
// The kernels. Each checks its arguments at the call, charges the collective, and launches the
// Gloo call on the stream: it runs when the work before it on the stream has run, on the CPU
// views of the device memory (HostAlias.h).

constexpr char kAllReduce[] = "tpu_dist::all_reduce_";
constexpr char kAllGather[] = "tpu_dist::all_gather_into_tensor_";
constexpr char kReduceScatter[] = "tpu_dist::reduce_scatter_tensor_";
constexpr char kBroadcast[] = "tpu_dist::broadcast_";

void check_operand(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_privateuseone(), op, ": expected a tpu tensor, got ", t.device());
  TORCH_CHECK(t.layout() == c10::kStrided && t.is_contiguous(), op,
              ": expected a dense contiguous tensor (Gloo's layout)");
}

double bytes_of(const at::Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
}

// Gloo's reduce ops; AVG and PREMUL_SUM are built from SUM by the group (distributed.py).
c10d::ReduceOp gloo_op(int64_t op) {
  using Type = c10d::ReduceOp::RedOpType;
  const auto type = static_cast<Type>(op);
  TORCH_CHECK_VALUE(op >= 0 && op < static_cast<int64_t>(Type::UNUSED) && type != Type::AVG &&
                        type != Type::PREMUL_SUM,
                    "tpu_dist: reduce op ", op, " is not one of Gloo's (AVG and PREMUL_SUM are "
                    "made of SUM by the process group)");
  return c10d::ReduceOp(type);
}

// Launches a recorded collective's device work on the stream: the cross-rank check of `checked`,
// then `call` (Gloo's calls and waits), without the GIL should the thread that runs it hold it
// (a synchronization runs queued work on the issuing thread): Gloo's threads take the GIL to
// release the Python tensors of collectives the group ran on the host, holding the lock that
// every new Gloo call takes.
template <typename F>
void launch_collective(const at::Tensor& written, const char* op, const Held& g, const char* kind,
                       std::vector<at::Tensor> checked, F call) {
  launch(written.device(), op,
         [g, kind, checked = std::move(checked), call = std::move(call), written]() mutable {
           runtime::without_gil([&] {
             if (g.check) check_same_on(*g.backend, kind, checked);
             call();
           });
         },
         {written});
}

at::Tensor& all_reduce_(at::Tensor& self, int64_t group, int64_t op) {
  const Held g = hold(group);
  const c10d::ReduceOp reduce = gloo_op(op);
  check_operand(self, kAllReduce);
  charge_recorded(group, "all_reduce", bytes_of(self), g.backend->getSize());
  const at::Tensor alias = host_alias(self);
  launch_collective(self, kAllReduce, g, "all_reduce", {alias}, [g, reduce, alias] {
    std::vector<at::Tensor> tensors{alias};
    c10d::AllreduceOptions options;
    options.reduceOp = reduce;
    g.backend->allreduce(tensors, options)->wait();
  });
  return self;
}

at::Tensor& all_gather_into_tensor_(at::Tensor& output, const at::Tensor& input, int64_t group) {
  const Held g = hold(group);
  check_operand(output, kAllGather);
  check_operand(input, kAllGather);
  check_same_device(kAllGather, {&output, &input});
  const int64_t size = g.backend->getSize();
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size && output.dtype() == input.dtype(),
                    kAllGather, ": the output must hold the group's ", size, " inputs");
  charge_recorded(group, "all_gather", bytes_of(output), size);
  at::Tensor out = host_alias(output), in = host_alias(input);  // (Gloo takes them non-const)
  launch_collective(output, kAllGather, g, "all_gather_into_tensor", {out, in},
                    [g, out, in, input]() mutable {
                      g.backend->_allgather_base(out, in)->wait();
                    });
  return output;
}

// Gloo has no reduce-scatter: an all-reduce of a copy of the input, then this rank's chunk.
at::Tensor& reduce_scatter_tensor_(at::Tensor& output, const at::Tensor& input, int64_t group,
                                   int64_t op) {
  const Held g = hold(group);
  const c10d::ReduceOp reduce = gloo_op(op);
  check_operand(output, kReduceScatter);
  check_operand(input, kReduceScatter);
  check_same_device(kReduceScatter, {&output, &input});
  const int64_t size = g.backend->getSize();
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size && output.dtype() == input.dtype(),
                    kReduceScatter, ": the input must hold the group's ", size, " outputs");
  charge_recorded(group, "reduce_scatter", bytes_of(input), size);
  const at::Tensor out = host_alias(output), in = host_alias(input);
  launch_collective(output, kReduceScatter, g, "reduce_scatter_tensor", {out, in},
                    [g, reduce, size, out, in, input] {
                      std::vector<at::Tensor> whole{in.clone()};
                      c10d::AllreduceOptions options;
                      options.reduceOp = reduce;
                      g.backend->allreduce(whole, options)->wait();
                      const int64_t rank = g.backend->getRank();
                      out.copy_(whole[0].reshape({size, -1})[rank].reshape(out.sizes()));
                    });
  return output;
}

at::Tensor& broadcast_(at::Tensor& self, int64_t group, int64_t root) {
  const Held g = hold(group);
  check_operand(self, kBroadcast);
  charge_recorded(group, "broadcast", bytes_of(self), g.backend->getSize());
  const at::Tensor alias = host_alias(self);
  launch_collective(self, kBroadcast, g, "broadcast", {alias}, [g, root, alias] {
    std::vector<at::Tensor> tensors{alias};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    g.backend->broadcast(tensors, options)->wait();
  });
  return self;
}

}  // namespace

void register_collective_group(int64_t id, const c10::intrusive_ptr<c10d::Backend>& backend,
                               bool check) {
  TORCH_CHECK(backend, "tpu_dist: no backend to register");
  Groups& g = groups();
  std::lock_guard<std::mutex> lock(g.mutex);
  Group& entry = g.by_id[id];
  entry.backend.emplace(backend);
  entry.check = check;
}

void check_same(int64_t group, const std::string& kind, const std::vector<at::Tensor>& tensors) {
  const Held g = hold(group);
  check_same_on(*g.backend, kind, tensors);
}

uint64_t charge_collective(const std::string& kind, double bytes, int64_t chips) {
  static const std::map<std::string, sim::CollectiveKind> kinds = {
      {"all_reduce", sim::CollectiveKind::all_reduce},
      {"all_gather", sim::CollectiveKind::all_gather},
      {"reduce_scatter", sim::CollectiveKind::reduce_scatter},
      {"all_to_all", sim::CollectiveKind::all_to_all},
      {"broadcast", sim::CollectiveKind::broadcast},
      {"reduce", sim::CollectiveKind::reduce},
      {"send_recv", sim::CollectiveKind::send_recv},
      {"barrier", sim::CollectiveKind::barrier}};
  const auto it = kinds.find(kind);
  TORCH_CHECK(it != kinds.end(), "unknown collective kind '", kind, "'");
  const sim::Estimate estimate = sim::cost_model().collective(it->second, bytes, chips);
  sim::record("c10d::" + kind, estimate);
  runtime::metrics::count("collectives." + kind);
  runtime::metrics::count("collectives." + kind + "_bytes", static_cast<int64_t>(bytes));
  return sim::collective_issued(estimate);
}

void recorded_collective_waited(int64_t group, uint64_t sequence) {
  std::optional<uint64_t> flight;
  {
    Groups& g = groups();
    std::lock_guard<std::mutex> lock(g.mutex);
    auto it = g.by_id.find(group);
    if (it == g.by_id.end()) return;
    auto f = it->second.flights.find(sequence);
    if (f == it->second.flights.end()) return;  // not run yet: in the graph, in stream order
    flight = f->second;
    it->second.flights.erase(f);
  }
  sim::collective_waited(*flight);
}

TORCH_LIBRARY(tpu_dist, m) {
  m.def("all_reduce_(Tensor(a!) self, int group, int op) -> Tensor(a!)");
  m.def("all_gather_into_tensor_(Tensor(a!) output, Tensor input, int group) -> Tensor(a!)");
  m.def("reduce_scatter_tensor_(Tensor(a!) output, Tensor input, int group, int op) -> "
        "Tensor(a!)");
  m.def("broadcast_(Tensor(a!) self, int group, int root) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(tpu_dist, PrivateUse1, m) {
  m.impl("all_reduce_", entry(TORCH_FN(all_reduce_), Capture::results_are_arguments));
  m.impl("all_gather_into_tensor_",
         entry(TORCH_FN(all_gather_into_tensor_), Capture::results_are_arguments));
  m.impl("reduce_scatter_tensor_",
         entry(TORCH_FN(reduce_scatter_tensor_), Capture::results_are_arguments));
  m.impl("broadcast_", entry(TORCH_FN(broadcast_), Capture::results_are_arguments));
}

}  // namespace torchtpu::aten
