// The recorder (Recording.h): the entry hook of fused eager (aten/Entry.h). Ops are recorded into
// the pending graph with their operands; factories return tensors over pending storages; ops
// that cannot be recorded first materialize the pending work they touch. See Defer.h.
#include "aten/Entry.h"
#include "aten/Launch.h"
#include "defer/Defer.h"
#include "defer/Recording.h"
#include "runtime/Env.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"

#include <ATen/EmptyTensor.h>
#include <ATen/TensorUtils.h>
#include <c10/util/hash.h>

#include <algorithm>
#include <atomic>
#include <unordered_set>

namespace torchtpu::defer {
namespace {

using aten::Capture;
using runtime::FlushReason;


// Broadcastable to `shape` (right-aligned, each dimension equal or 1).
bool broadcasts_to(c10::IntArrayRef sizes, c10::IntArrayRef shape) {
  if (sizes.size() > shape.size()) return false;
  const size_t lead = shape.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1 && sizes[i] != shape[lead + i]) return false;
  }
  return true;
}

// Ops whose kernels raise on the values they read: an integer tensor passed as an index or a
// target (index_select, gather, scatter, embedding, index_put, nll_loss, ...: "index out of
// range"), or an integer division (ZeroDivisionError). Node::checks_values.
bool checks_values(const c10::FunctionSchema& schema,
                   const OperandRanges& ranges,
                   const std::vector<Operand>& operands, const aten::OpTraits& traits) {
  static const std::unordered_set<std::string_view> index_arguments = {"index", "indices",
                                                                       "target", "offsets"};
  // (Cheap first: most graphs read no integer tensor at all.)
  bool reads_integers = false;
  for (const Operand& o : operands) {
    reads_integers = reads_integers ||
                     (o.defined() && o.read && c10::isIntegralType(o.dtype, /*includeBool=*/false));
  }
  if (!reads_integers) return false;
  const bool divides = traits.divides_integers;
  for (size_t i = 0; i < ranges.size() && i < schema.arguments().size(); ++i) {
    const bool index = index_arguments.count(schema.arguments()[i].name()) > 0;
    if (!index && !divides) continue;
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k) {
      const Operand& o = operands[k];
      if (o.defined() && o.read && c10::isIntegralType(o.dtype, /*includeBool=*/false)) {
        return true;
      }
    }
  }
  return false;
}


// Remembers `shape` as the shape in which `node` wrote its pending outputs.
void note_producer_shape(State& s, const Node& node, const Dims& shape) {
  for (const auto& o : node.operands) {
    if (o.written && o.pending) s.producer_shapes[o.pending->id] = shape;
  }
  for (const auto& o : node.results) {
    if (o.written && o.pending) s.producer_shapes[o.pending->id] = shape;
  }
}

// An element-wise op is described over the shape of the region that made one of its inputs
// when its operands map their elements the same way in that shape (as a view would): a linear
// layer on a [batch, seq, features] input multiplies the [batch * seq, features] matrix and
// views the product back, a batched matmul makes [batch * heads, M, N] that attention views as
// [batch, heads, M, N]; their bias, activation, scaling and residual add then have the
// matmul's shape and join its region as the epilogue (and a chain over a reshaped value joins
// the chain that made it). `shapes`: pending storage id -> the shape of the op that wrote it.
void adopt_producer_shape(Node& node, const ska::flat_hash_map<uint64_t, Dims>& shapes) {
  const int64_t numel = c10::multiply_integers(node.shape);
  if (numel == 0) return;
  for (const auto& in : node.operands) {
    if (!in.pending || in.written) continue;
    auto it = shapes.find(in.pending->id);
    if (it == shapes.end() || it->second == node.shape) continue;
    const Dims& target = it->second;
    if (c10::multiply_integers(target) != numel) continue;
    struct Rewrite {
      Operand* operand;
      std::vector<int64_t> strides;
    };
    std::vector<Rewrite> rewrites;
    bool ok = true;
    auto plan_operand = [&](Operand& o) {
      if (!ok || !o.defined() || o.sizes.empty()) return;  // 0-d operands broadcast anywhere
      // The operand expanded to the op's shape (broadcast dimensions get stride 0) ...
      const size_t n = node.shape.size();
      c10::DimVector strides(n, 0);
      const size_t lead = n - o.sizes.size();
      for (size_t i = 0; i < o.sizes.size(); ++i) {
        strides[lead + i] = (o.sizes[i] == 1 && node.shape[lead + i] != 1) ? 0 : o.strides[i];
      }
      // ... then viewed in the target shape.
      auto viewed = at::detail::computeStride(c10::IntArrayRef(node.shape), strides,
                                              c10::IntArrayRef(target));
      if (!viewed) {
        ok = false;
        return;
      }
      rewrites.push_back({&o, std::move(*viewed)});
    };
    for (auto& o : node.operands) plan_operand(o);
    for (auto& o : node.results) plan_operand(o);
    if (!ok) continue;
    for (auto& r : rewrites) {
      Operand& o = *r.operand;
      o.sizes = target;
      o.strides.assign(r.strides.begin(), r.strides.end());
      if (o.tensor.defined()) {
        // An external tensor is handed to the kernel as it is: give it the new geometry too
        // (an alias over the same storage, made without dispatching).
        at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
            c10::TensorImpl::VIEW, c10::Storage(o.tensor.storage()), o.tensor.key_set(),
            o.tensor.dtype());
        alias.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides,
                                                           o.tensor.storage_offset());
        o.tensor = std::move(alias);
      }
    }
    node.shape = target;
    return;
  }
}

}  // namespace

namespace {

// The node of an op entering, with what it was recorded under: its stream (it runs there,
// whichever thread flushes the graph), its line, the warnings made at the call, the
// deterministic-algorithms setting and the matmul precision; its arguments as they are (its
// tensor slots are turned into operands next).
Node start_node(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                Capture capture, const std::string& name, const aten::OpTraits& traits,
                c10::Device device, std::string location) {
  const size_t base = stack.size() - num_args;
  Node node(op);
  node.name = &name;
  node.traits = &traits;
  node.capture = capture;
  node.device = device;
  // The op runs on the stream it was recorded on, whichever thread flushes the graph.
  node.stream = runtime::current_stream(device.index()).id();
  node.location = std::move(location);
  node.warned_at_call = aten::call_warned();
  node.deterministic = aten::DeterministicAlgorithms::Setting::now();
  // The matmul precision in force at the op (the VPU's ops run no matmul: not looked up).
  if (traits.unit != aten::OpUnit::vpu) node.precision = sim::current_precision();
  node.args.assign(stack.begin() + base, stack.end());
  return node;
}

using Returned = c10::SmallVector<c10::IValue, 4>;

// An op whose results are its arguments (in-place, out=): marks the operands it writes (and
// whether it reads them), and returns the arguments its results are.
Returned mark_written_arguments(Node& node, const torch::jit::Stack& stack, size_t base,
                                const OperandRanges& ranges, const std::string& name,
                                const aten::OpTraits& traits) {
  const auto& schema = node.op.schema();
  const size_t num_args = schema.arguments().size();
  Returned returned;
  for (size_t i = 0; i < num_args; ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k) {
      node.operands[k].written = true;
      node.operands[k].read = !schema.arguments()[i].is_out() && !traits.writes_without_reading;
    }
  }
  for (const auto& ret : schema.returns()) {
    int found = -1;
    for (size_t i = 0; i < num_args && ret.alias_info() != nullptr; ++i) {
      const auto* info = schema.arguments()[i].alias_info();
      if (info != nullptr && info->isWrite() &&
          info->beforeSets() == ret.alias_info()->beforeSets()) {
        found = static_cast<int>(i);
      }
    }
    TORCH_INTERNAL_ASSERT(found >= 0, name, ": a result that is not an argument");
    returned.push_back(stack[base + found]);
  }
  return returned;
}

// An op returning new tensors: a tensor over a fresh pending storage for each meta result (a
// result operand of the node, hashed into `h`), the value now of each integer result.
Returned make_new_results(State& s, Node& node, c10::Device device,
                          const std::vector<at::Tensor>& new_results,
                          const std::vector<std::pair<size_t, c10::IValue>>& constants,
                          size_t& h) {
  Returned returned;
  for (size_t j = 0; j < new_results.size(); ++j) {
    const at::Tensor& meta = new_results[j];
    auto constant = std::find_if(constants.begin(), constants.end(),
                                 [&](const auto& c) { return c.first == j; });
    if (constant != constants.end()) {  // an integer the op returns (a size): its value now
      node.results.emplace_back();
      returned.push_back(constant->second);
      continue;
    }
    at::Tensor t;
    if (meta.defined()) {
      t = make_pending_tensor(device, meta.sizes(), meta.strides(), meta.scalar_type(),
                              meta.storage().nbytes());
      Operand o = make_operand(s, t, h);
      o.read = false;
      o.written = true;
      node.results.push_back(std::move(o));
    } else {
      node.results.emplace_back();
    }
    returned.push_back(t);
  }
  return returned;
}

// Element-wise: one result shape, every operand broadcasts to it. Such a node may take the
// shape of the region that made an input (adopt_producer_shape); a matmul leader notes the
// shape it writes in.
void classify_elementwise(State& s, Node& node, const aten::OpTraits& traits) {
  if (traits.pointwise) {
    const Operand* out = nullptr;
    int outs = 0;
    for (const auto& o : node.operands) {
      if (o.written) { out = &o; ++outs; }
    }
    for (const auto& o : node.results) {
      if (o.written) { out = &o; ++outs; }
    }
    if (outs == 1) {
      bool ok = true;
      for (const auto& o : node.operands) {
        if (!o.defined()) continue;
        // (Conjugate and negative views are resolved by their kernel, not by block views.)
        ok = ok && !o.conj && !o.neg;
        if (o.tensor.defined() && o.tensor.is_cpu()) {
          ok = ok && o.sizes.empty();
        } else {
          ok = ok && broadcasts_to(o.sizes, out->sizes);
        }
      }
      node.elementwise = ok;
      node.shape = out->sizes;
      if (ok) {
        adopt_producer_shape(node, s.producer_shapes);
        note_producer_shape(s, node, node.shape);
      }
    }
  } else if (traits.role == aten::FusionRole::matmul_leader) {
    for (const auto& o : node.operands) {
      if (o.written) note_producer_shape(s, node, o.sizes);
    }
  }
}

// Appends the node to the graph, its fingerprint `h` now the graph's; the stack's arguments are
// replaced by `returned`; where the node ends a repeated sequence (`repeats`, RepeatedOps.cpp)
// or at the graph size limit the graph is flushed.
void append_node(State& s, Node node, size_t h, torch::jit::Stack* stack, size_t num_args,
                 Returned& returned, bool repeats) {
  s.fingerprint = h;
  // (Room for as many nodes as the last graph had: a program recorded again grows no vector.)
  if (s.nodes.capacity() == 0) s.nodes.reserve(std::max<size_t>(64, s.last_graph_size));
  s.nodes.push_back(std::move(node));
  s.any_pending.store(true);
  static const runtime::metrics::Counter ops_recorded("defer.ops_recorded");
  ops_recorded.add();

  torch::jit::drop(*stack, num_args);
  for (auto& r : returned) stack->push_back(std::move(r));

  if (repeats) {
    note_materialization(FlushReason::repeated_ops, {}, {});
    flush_locked(s, FlushReason::repeated_ops);
    return;
  }
  // (A program being captured is one graph whatever its size.)
  if (static_cast<int64_t>(s.nodes.size()) >= s.max_ops && !s.capture.active) {
    note_materialization(FlushReason::graph_size_limit, {}, {});
    flush_locked(s, FlushReason::graph_size_limit);
  }
}

}  // namespace

void record(State& s, const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
            const std::string& name, const aten::OpTraits& traits, c10::Device device,
            std::vector<at::Tensor> new_results,
            const std::vector<std::pair<size_t, c10::IValue>>& constants, std::string location) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t base = stack->size() - num_args;
  if (s.capture.active && std::this_thread::get_id() != s.capture.owner) {
    fail_capture(s, "another thread recorded ops during the capture");
  }
  TORCH_INTERNAL_ASSERT(capture != Capture::fallback);  // (whose name is not kept: Entry.h)
  Node node =
      start_node(op, *stack, num_args, capture, name, traits, device, std::move(location));

  size_t h = hash_op(s.fingerprint, name, node.stream, device, schema, node.args);
  const auto ranges = operand_ranges(node.args);
  node.operands.reserve(ranges.empty() ? 0 : ranges.back().second);
  for_each_tensor_slot(node.args, [&](at::Tensor& t) {
    node.operands.push_back(make_operand(s, t, h));
    t = at::Tensor();
  });

  // What the op writes.
  Returned returned;
  if (capture == Capture::copy) {
    node.operands[1].written = true;  // _copy_from(self, dst)
    node.operands[1].read = false;
    returned.push_back((*stack)[base + 1]);
  } else if (capture == Capture::results_are_arguments) {
    returned = mark_written_arguments(node, *stack, base, ranges, name, traits);
  } else {
    returned = make_new_results(s, node, device, new_results, constants, h);
  }

  classify_elementwise(s, node, traits);
  node.checks_values = checks_values(schema, ranges, node.operands, traits);
  if (traits.random || traits.collective) {
    // A random op (recorded only into programs): its draws advance the generator. A collective:
    // every rank runs it, in one order. Either always runs, through its kernel, in program order
    // with the other ops of its kind (regions that are not fused run in the order recorded).
    node.checks_values = true;
    node.elementwise = false;
  }
  if (traits.collective) {
    static const runtime::metrics::Counter collectives("defer.collectives_recorded");
    collectives.add();
  }
  // (A program being captured is one graph, whatever repeats in it.)
  const bool repeats = s.repeated_ops != RepeatedOps::off && !s.capture.active &&
                       s.repeats.push(op_signature(name, schema, node.args, node.operands));
  append_node(s, std::move(node), h, stack, num_args, returned, repeats);
}

namespace {

bool on_entry(const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
              const aten::OpTraits& traits, const std::string& name) {
  State& s = state();
  const bool capturing = t_capturing;
  if (runtime::eager_mode() != runtime::EagerMode::fused && !capturing) {
    // (Recorded work of another thread or before a switch runs before any op of another mode.)
    if (s.any_pending.load(std::memory_order_relaxed)) {
      materialize_all(runtime::OpModeScope::forced() ? forced_reason() : FlushReason::mode_switch);
    }
    return false;
  }
  if (capture == Capture::view) return false;
  if (capture == Capture::foreach) {
    if (capturing || !foreach_as_one_node(op, *stack)) {
      // Recorded as its per-tensor ops: element-wise ops the fusion passes know.
      aten::run_per_tensor(op, stack);
      return true;
    }
    capture = Capture::results_are_arguments;  // one node; its kernel is the one launch
  }
  if ((capture == Capture::none || capture == Capture::fallback) &&
      has_sparse_argument(*stack, op.schema().arguments().size())) {
    // A sparse tensor has no storage of its own (its indices and values are tensors of their
    // own); its ops are metadata or the CPU fallback (aten/Sparse.cpp, registered as these two
    // kinds: the ops fused eager records never see one): they run now, after everything
    // recorded.
    if (s.any_pending.load(std::memory_order_relaxed)) materialize_all(FlushReason::cpu_fallback);
    return false;
  }
  if (capture == Capture::factory) {
    if (record_factory(op, stack, name)) return true;
    if (capturing) fold_or_fail(s, op, *stack, "a factory ran at once: " + name);
    return false;
  }
  if (capture == Capture::random && name == "aten::native_dropout" && record_dropout(stack)) {
    return true;  // (while capturing, its mask's bernoulli_ is recorded too)
  }
  if (capturing && capture == Capture::random) {
    // In a program a random op is recorded like any op: it draws its numbers when the program
    // runs, in the program's order (record() keeps it from being fused or eliminated). (Fused
    // eager runs it at once instead: an eager graph may be cut anywhere, and its draws must
    // stay in program order with the ops around it.)
    capture = random_op_writes_arguments(op.schema()) ? Capture::results_are_arguments
                                                      : Capture::new_results;
  }
  Decision d = decide(op, stack, capture, name, traits);
  if (d.run_now) {
    if (capturing) {
      fold_or_fail(s, op, *stack, std::string(runtime::policy(*d.run_now).label) + ": " + name,
                   traits.random);
    }
    prepare_to_run(s, op, stack, *d.run_now, name);
    return false;
  }
  size_t new_bytes = 0;
  for (const auto& meta : d.new_results) {
    if (meta.defined()) new_bytes += meta.storage().nbytes();
  }
  if (new_bytes > 0 && memory_pressure(d.device, new_bytes)) {  // runs now
    if (capturing) fold_or_fail(s, op, *stack, "memory pressure at " + name, traits.random);
    return false;
  }
  // (A program keeps the line of each op, for its errors: a capture runs once.)
  std::string location = record_locations() || capturing ? current_location() : std::string();
  auto lock = runtime::lock_without_gil(s.mutex);
  record(s, op, stack, capture, name, traits, d.device, std::move(d.new_results), d.constants,
         std::move(location));
  return true;
}

std::atomic<LocationProvider> g_location_provider{nullptr};
std::atomic<bool> g_record_locations{runtime::env::value("TORCHTPU_DEFER_LOCATIONS") == "1"};

struct Installer {
  Installer() { aten::set_entry_hook(&on_entry); }
} installer;

}  // namespace

std::string current_location() {
  LocationProvider p = g_location_provider.load();
  return p == nullptr ? std::string() : p();
}

void set_location_provider(LocationProvider provider) { g_location_provider.store(provider); }
void set_record_locations(bool on) { g_record_locations.store(on); }
bool record_locations() { return g_record_locations.load(std::memory_order_relaxed); }

void set_max_pending_ops(int64_t n) {
  TORCH_CHECK_VALUE(n >= 1, "the pending graph size limit must be at least 1, got ", n);
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  s.max_ops = n;
}

}  // namespace torchtpu::defer
