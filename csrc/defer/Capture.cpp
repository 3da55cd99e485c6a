// Capture: the entry hook of fused eager (aten/Entry.h). Ops are recorded into the pending graph
// with their operands; factories return tensors over pending storages; ops that cannot be
// recorded first materialize the pending work they touch. See Defer.h.
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/Unsigned.h"
#include "defer/Defer.h"
#include "defer/Graph.h"
#include "defer/Program.h"
#include "runtime/Allocator.h"
#include "runtime/Device.h"
#include "runtime/Env.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/flat_hash_map.h>
#include <c10/util/hash.h>
#include <c10/util/strides.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace torchtpu::defer {
namespace {

using aten::Capture;
using runtime::FlushReason;

// ---------------------------------------------------------------------------------------------
// Pending storages

struct Token {
  std::shared_ptr<PendingStorage> record;
};

// Bytes of the pending storages that tensors still refer to, per device (rounded as the
// allocator will round them): what the device will need when they run, on top of its
// allocated bytes. Checked against the HBM capacity as ops are recorded (memory_pressure).
constexpr size_t kMaxDevices = 64;
std::array<std::atomic<int64_t>, kMaxDevices> g_pending_bytes{};

void count_pending(PendingStorage& record) {
  const auto index = static_cast<size_t>(record.device.index());
  TORCH_INTERNAL_ASSERT(index < kMaxDevices);
  record.counted.store(true);
  g_pending_bytes[index] += static_cast<int64_t>(runtime::Allocator::round_size(record.nbytes));
}

void uncount_pending(PendingStorage& record) {
  if (!record.counted.exchange(false)) return;
  g_pending_bytes[static_cast<size_t>(record.device.index())] -=
      static_cast<int64_t>(runtime::Allocator::round_size(record.nbytes));
}

// The data pointer of a pending storage: one page of address space that is never readable or
// writable, so that the storage is not taken for a null ("invalid") one, and a read that
// bypasses the materializer below fails loudly instead of seeing stale memory.
void* pending_address() {
  static void* page = [] {
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TORCH_INTERNAL_ASSERT(p != MAP_FAILED, "fused eager: could not reserve the pending page");
    return p;
  }();
  return page;
}

void token_deleter(void* ctx) {
  auto* token = static_cast<Token*>(ctx);
  if (!token->record->materialized.load()) {
    token->record->dead.store(true);
    uncount_pending(*token->record);
  }
  delete token;
}

struct State {
  std::recursive_mutex mutex;
  std::vector<Node> nodes;
  size_t last_graph_size = 0;  // nodes of the last graph taken (a hint for the next one's room)
  uint64_t fingerprint = 0;
  // (Open-addressing maps: no heap allocation per recorded op; cleared maps keep their slots.)
  ska::flat_hash_map<uint64_t, int> local_pending;                 // record id -> local id
  ska::flat_hash_map<uint64_t, Dims> producer_shapes;  // record id -> shape it was written in
  ska::flat_hash_map<const c10::StorageImpl*, int> local_external;  // storage -> local id
  // Every pending storage not yet materialized or dead (pruned as they go).
  ska::flat_hash_map<uint64_t, std::shared_ptr<PendingStorage>> registry;
  std::atomic<bool> any_pending{false};
  uint64_t next_id = 1;
  int64_t max_ops = runtime::env::get_int("TORCHTPU_DEFER_MAX_OPS").value_or(4096);
  std::mutex stats_mutex;
  std::map<std::string, std::map<std::string, int64_t>> materializations;
  // The compiled program being captured (Program.h): the thread capturing it, and why it
  // failed (empty while it can still become a program).
  struct ProgramCapture {
    bool active = false;
    std::thread::id owner;
    std::string failure;
    std::unordered_set<const c10::StorageImpl*> inputs;  // the graph's input storages
    int64_t folded = 0;
  } capture;
};

thread_local bool t_capturing = false;  // this thread captures a program (records in any mode)

// The capture cannot become a program: its graph will run op by op. The capturing thread stops
// recording in a mode where it would not (caller holds the mutex).
void fail_capture(State& s, const std::string& why) {
  if (!s.capture.active) return;
  if (s.capture.failure.empty()) s.capture.failure = why;
  if (std::this_thread::get_id() == s.capture.owner) t_capturing = false;
}

bool capture_owner(const State& s) {
  return s.capture.active && std::this_thread::get_id() == s.capture.owner;
}

void flush_locked(State& s, runtime::FlushReason reason);

// fail_capture() before an op that runs at once: what the capture recorded runs first, so that
// random numbers are drawn in program order (a recorded random op draws when its graph runs).
void fail_capture_and_flush(State& s, const std::string& why) {
  fail_capture(s, why);
  if (!s.nodes.empty()) flush_locked(s, runtime::FlushReason::compiled_graph);
}

// An op of a graph being captured that runs at once instead of being recorded (a factory whose
// size its out= kernel decides, such as arange; an op without a meta kernel; a host read of a
// constant) is folded into the program as a constant when it reads no graph input and nothing
// pending: its result is the same at every call. Otherwise the capture fails. (Random ops fail
// before: their numbers are not constants.) The program later refuses to write a constant.
void fold_or_fail(State& s, const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  const std::string& why, bool random = false) {
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

State& state() {
  static auto* s = new State();  // leaked: tensors may die after static destruction
  return *s;
}

void update_any_pending(State& s) {
  s.any_pending.store(!s.nodes.empty() || !s.registry.empty());
}

void prune_registry(State& s) {
  for (auto it = s.registry.begin(); it != s.registry.end();) {
    if (it->second->dead.load() || it->second->materialized.load()) {
      it = s.registry.erase(it);
    } else {
      ++it;
    }
  }
}

std::string current_location();

// c10's storage materializer (c10/core/StorageMaterializer.h), installed on every pending
// storage: a Python caller that asks for its memory (tensor.data_ptr(),
// untyped_storage().data_ptr(), torch.save, copy.deepcopy, a C++ extension called from Python)
// first runs the recorded work that the graph holds and gives the storage memory; counted as the
// materialization "storage access" with its Python line. Ops ask for the data pointers of their
// operands too (TensorIterator) without the GIL and without reading them: those accesses leave
// the storage pending, and the materializer, which c10 clears after each call, is installed
// again when the op is recorded (make_operand).
void materialize_on_access(c10::StorageImpl* impl) {
  const c10::DataPtr& data = impl->_mutable_data_ptr_no_checks();
  if (data.get_deleter() != &token_deleter) return;
  if (aten::inside_kernel() || !runtime::thread_holds_gil()) return;
  std::shared_ptr<PendingStorage> record = static_cast<Token*>(data.get_context())->record;
  State& s = state();
  const std::string location = current_location();  // (before the lock: it takes the GIL)
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    if (s.local_pending.count(record->id) > 0) {
      note_materialization(FlushReason::storage_access, {}, location);
      flush_locked(s, FlushReason::storage_access);
    }
  }
  materialize(*record);
}

at::Tensor make_pending_tensor(c10::Device device, c10::IntArrayRef sizes,
                               c10::IntArrayRef strides, c10::ScalarType dtype, size_t nbytes) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      make_pending_storage(device, nbytes).second,
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Op classification

// Broadcastable to `shape` (right-aligned, each dimension equal or 1).
bool broadcasts_to(c10::IntArrayRef sizes, c10::IntArrayRef shape) {
  if (sizes.size() > shape.size()) return false;
  const size_t lead = shape.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1 && sizes[i] != shape[lead + i]) return false;
  }
  return true;
}

// Matmuls are recorded when their operands share an MXU dtype: other dtypes are fallbacks or
// errors, which must happen at the op (as in strict eager), not when the graph runs.
bool mxu_recordable(const aten::OpTraits& traits, c10::ArrayRef<c10::IValue> args) {
  if (traits.unit != aten::OpUnit::mxu) return true;
  std::optional<c10::ScalarType> dtype;
  bool ok = true;
  for (const c10::IValue& v : args) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) continue;
    if (dtype && *dtype != t.scalar_type()) ok = false;
    dtype = t.scalar_type();
  }
  if (!ok || !dtype) return false;
  if (traits.integer_operands) return *dtype == c10::kChar || *dtype == c10::kInt;
  return *dtype == c10::kFloat || *dtype == c10::kBFloat16 || *dtype == c10::kHalf;
}

// ---------------------------------------------------------------------------------------------
// Fingerprints: the op sequence, the operands' shapes, strides, dtypes and aliasing, and the
// non-scalar arguments. Scalars (Scalar and float arguments) are runtime values.

void hash_ivalue(size_t& h, const c10::IValue& v) {
  if (v.isNone()) {
    h = c10::hash_combine(h, 0x9e37);
  } else if (v.isInt()) {
    h = c10::hash_combine(h, std::hash<int64_t>()(v.toInt()));
  } else if (v.isBool()) {
    h = c10::hash_combine(h, v.toBool() ? 3 : 5);
  } else if (v.isString()) {
    h = c10::hash_combine(h, std::hash<std::string_view>()(v.toStringView()));
  } else if (v.isIntList()) {
    for (int64_t x : v.toIntList()) h = c10::hash_combine(h, std::hash<int64_t>()(x));
  } else if (v.isDevice()) {
    h = c10::hash_combine(h, std::hash<c10::Device>()(v.toDevice()));
  } else {
    h = c10::hash_combine(h, static_cast<size_t>(v.tagKind().size()));
  }
}

bool is_runtime_scalar(const c10::Argument& a) {
  auto type = a.type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  const auto k = type->kind();
  return k == c10::TypeKind::NumberType || k == c10::TypeKind::FloatType ||
         k == c10::TypeKind::ComplexType;
}

// The largest tensor of an in-place foreach op recorded as one node (a fused region's block:
// docs/eager-modes.md, "Foreach ops").
constexpr int64_t kForeachNodeMaxElements = 32768;

// Whether fused eager records this foreach op as one node, run at the flush as strict eager runs
// it (one launch over its lists), rather than as its per-tensor ops: an in-place op whose
// tensors are all in lists, dense, on the device and no larger than a fused region's block, and
// that writes two tensors or more (over one, it would pass for an element-wise op the fusion
// passes run by blocks; recorded per tensor, it is that op).
// Fusing a parameter's update chain saves passes over memory only where the tensors are larger
// than a block (the MLP step of benchmarks/eager_modes.py); over small ones each per-tensor op
// costs its recording and flush and saves nothing (a small model's AdamW: 192 recorded ops for
// 24 parameters, about 0.3 ms per step; docs/host-speed.md, "Foreach ops as one launch").
bool foreach_as_one_node(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  if (!schema.returns().empty()) return false;  // (a functional one makes new lists)
  const size_t num_args = schema.arguments().size();
  const auto args = stack.end() - num_args;
  // (Its first argument is the list it writes.)
  if (!args->isTensorList() || args->toTensorList().size() < 2) return false;
  for (auto it = args; it != stack.end(); ++it) {
    // (A scalar given as a tensor is read by the kernel, .item(): per tensor, as recorded ops.)
    if (it->isTensor()) return false;
    if (!it->isTensorList()) continue;
    for (const at::Tensor& t : it->toTensorList()) {
      if (!t.defined() || !t.device().is_privateuseone() || t.layout() != c10::kStrided ||
          t.numel() > kForeachNodeMaxElements) {
        return false;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Recording


Operand make_operand(State& s, const at::Tensor& t, size_t& h) {
  Operand o;
  if (!t.defined()) {
    h = c10::hash_combine(h, 1);
    return o;
  }
  o = operand_geometry(t);
  h = c10::hash_combine(h, (o.conj ? 0x11 : 0) + (o.neg ? 0x22 : 0));
  if (auto record = pending_of(t.storage())) {
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    if (!impl->has_materializer()) impl->set_materializer(&materialize_on_access);
    auto [it, fresh] =
        s.local_pending.emplace(record->id, static_cast<int>(s.local_pending.size()));
    h = c10::hash_combine(h, 0x100000 + it->second);
    o.pending = std::move(record);
  } else if (t.device().is_cpu()) {
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the binding wrapped for this call: nobody else holds it, so it keeps
      // its value; kept as it is.
      o.tensor = t;
    } else {
      // A CPU scalar: its value now (a plain copy of its bytes, cheaper than clone()).
      o.tensor = at::detail::empty_cpu({}, t.scalar_type(), std::nullopt, std::nullopt,
                                       std::nullopt, std::nullopt);
      if (t.numel() == 1) {
        std::memcpy(o.tensor.data_ptr(), t.data_ptr(), t.element_size());
      } else {
        o.tensor = t.clone();
      }
    }
    h = c10::hash_combine(h, 7);
  } else {
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto [it, fresh] =
        s.local_external.emplace(impl, static_cast<int>(s.local_external.size()));
    h = c10::hash_combine(h, 0x200000 + it->second);
    o.tensor = t;
  }
  h = c10::hash_combine(h, static_cast<size_t>(o.dtype));
  for (int64_t x : o.sizes) h = c10::hash_combine(h, std::hash<int64_t>()(x));
  for (int64_t x : o.strides) h = c10::hash_combine(h, std::hash<int64_t>()(x) * 31);
  h = c10::hash_combine(h, std::hash<int64_t>()(o.offset));
  return o;
}

// Which operands (in visit order) each argument owns.
using OperandRanges = c10::SmallVector<std::pair<size_t, size_t>, 8>;
OperandRanges operand_ranges(const torch::jit::Stack& args) {
  OperandRanges ranges;
  size_t n = 0;
  for (const c10::IValue& v : args) {
    size_t count = 0;
    if (v.isTensor()) {
      count = 1;
    } else if (v.isTensorList()) {
      count = v.toTensorList().size();
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) count += std::optional<at::Tensor>(t).has_value();
    }
    ranges.emplace_back(n, n + count);
    n += count;
  }
  return ranges;
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

// A random op that fills its arguments (bernoulli_, normal_, ...), rather than returning new
// tensors.
bool random_op_writes_arguments(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite()) return true;
  }
  return false;
}

// Records the op. `new_results`: the meta results (for Capture::new_results), else empty.
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
  node.args.assign(stack->begin() + base, stack->end());

  size_t h = c10::hash_combine(s.fingerprint, std::hash<std::string>()(name));
  h = c10::hash_combine(h, static_cast<size_t>(node.stream) * 0x9e3779b1 + device.index());
  for (size_t i = 0; i < num_args; ++i) {
    if (is_runtime_scalar(schema.arguments()[i])) continue;
    const c10::IValue& v = node.args[i];
    if (!v.isTensor() && !v.isTensorList() && !v.isOptionalTensorList()) hash_ivalue(h, v);
  }
  const auto ranges = operand_ranges(node.args);
  node.operands.reserve(ranges.empty() ? 0 : ranges.back().second);
  for_each_tensor_slot(node.args, [&](at::Tensor& t) {
    node.operands.push_back(make_operand(s, t, h));
    t = at::Tensor();
  });

  // What the op writes.
  c10::SmallVector<c10::IValue, 4> returned;
  if (capture == Capture::copy) {
    node.operands[1].written = true;  // _copy_from(self, dst)
    node.operands[1].read = false;
    returned.push_back((*stack)[base + 1]);
  } else if (capture == Capture::results_are_arguments) {
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
      returned.push_back((*stack)[base + found]);
    }
  } else {
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
  }

  // Element-wise: one result shape, every operand broadcasts to it.
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

  node.checks_values = checks_values(schema, ranges, node.operands, traits);
  if (traits.random) {
    // (Recorded only into programs.) Its draws advance the generator: it always runs, through
    // its kernel, in program order with the other random ops.
    node.checks_values = true;
    node.elementwise = false;
  }
  s.fingerprint = h;
  // (Room for as many nodes as the last graph had: a program recorded again grows no vector.)
  if (s.nodes.capacity() == 0) s.nodes.reserve(std::max<size_t>(64, s.last_graph_size));
  s.nodes.push_back(std::move(node));
  s.any_pending.store(true);
  static const runtime::metrics::Counter ops_recorded("defer.ops_recorded");
  ops_recorded.add();

  torch::jit::drop(*stack, num_args);
  for (auto& r : returned) stack->push_back(std::move(r));

  // (A program being captured is one graph whatever its size.)
  if (static_cast<int64_t>(s.nodes.size()) >= s.max_ops && !s.capture.active) {
    note_materialization(FlushReason::graph_size_limit, {}, {});
    flush_locked(s, FlushReason::graph_size_limit);
  }
}

// An element-wise out= op given an empty out tensor (PyTorch's generic kernels of some
// non-structured ops, such as abs, pass `empty({0})`): the out tensor gets the broadcast shape of
// the inputs, contiguous, over a pending storage, as the kernel would resize it.
// The result an element-wise kernel's TensorIterator allocates for these inputs, as a meta
// tensor: their broadcast shape, laid out in the inputs' memory order (a transposed input makes
// a transposed result, as on the CPU). 0-d CPU tensors are scalars and take no part.
at::Tensor elementwise_result_meta(const std::vector<at::Tensor>& inputs, c10::ScalarType dtype) {
  at::Tensor meta_out = at::detail::empty_meta({0}, dtype, std::nullopt, std::nullopt,
                                               std::nullopt, std::nullopt);
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).resize_outputs(true);
  config.add_output(meta_out);
  std::vector<at::Tensor> metas;
  metas.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) continue;
    metas.push_back(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type(),
                                                   std::nullopt, std::nullopt, std::nullopt));
    config.add_const_input(metas.back());
  }
  config.build();
  return meta_out;
}

void size_elementwise_out(const c10::FunctionSchema& schema, const aten::OpTraits& traits,
                          c10::ArrayRef<c10::IValue> args, c10::Device device) {
  if (!traits.pointwise) return;
  int out_index = -1;
  at::DimVector shape;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (schema.arguments()[i].is_out()) {
      if (out_index >= 0 || !t.defined() || t.numel() != 0 || t.storage().nbytes() != 0 ||
          !t.device().is_privateuseone()) {
        return;
      }
      out_index = static_cast<int>(i);
    } else if (t.defined()) {
      shape = at::infer_size_dimvector(shape, t.sizes());
    }
  }
  if (out_index < 0) return;
  const at::Tensor& out = args[out_index].toTensor();
  // An empty result of the broadcast shape already (x + 1 of shape (2, 0, 1): PyTorch's generic
  // kernel made it (0, 1, 0)-strided) is not resized by the kernel: its strides stay.
  if (out.sizes() == c10::IntArrayRef(shape)) return;
  std::vector<at::Tensor> inputs;
  inputs.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor() && static_cast<int>(i) != out_index) inputs.push_back(args[i].toTensor());
  }
  // Inputs of the result's shape, all contiguous (CPU scalars aside): TensorIterator makes the
  // result contiguous too (its fast set-up), so no iterator over meta tensors is built.
  const bool plain = std::all_of(inputs.begin(), inputs.end(), [&](const at::Tensor& t) {
    return !t.defined() || (t.is_cpu() && t.dim() == 0) ||
           (t.sizes() == c10::IntArrayRef(shape) && t.is_contiguous());
  });
  at::DimVector strides;
  if (plain) {
    strides = c10::contiguous_strides(shape);
  } else {
    const at::Tensor meta_out = elementwise_result_meta(inputs, out.scalar_type());
    strides.assign(meta_out.strides().begin(), meta_out.strides().end());
    TORCH_INTERNAL_ASSERT(meta_out.sizes() == c10::IntArrayRef(shape));
  }
  at::Tensor pending = make_pending_tensor(device, shape, strides, out.scalar_type(),
                                           c10::multiply_integers(shape) * out.element_size());
  out.unsafeGetTensorImpl()->set_storage_keep_dtype(pending.storage());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(shape, strides);
}

// Results of the hottest ops returning new tensors (OpTraits Sizing::rule), sized here as their
// CPU kernels size them (contiguous, in the input's dtype), instead of through their meta
// kernels, which are Python functions (about a millisecond each with the GIL). nullopt: the
// arguments are not a case of the rule; use the meta kernel.
std::optional<std::vector<at::Tensor>> sized_here(std::string_view name,
                                                  c10::ArrayRef<c10::IValue> args) {
  auto like = [](c10::IntArrayRef sizes, c10::ScalarType dtype) {
    return at::detail::empty_meta(sizes, dtype, std::nullopt, std::nullopt, std::nullopt,
                                  std::nullopt);
  };
  auto tensor = [&](size_t i) -> const at::Tensor* {
    return args[i].isTensor() && args[i].toTensor().defined() ? &args[i].toTensor() : nullptr;
  };
  if (name == "aten::native_layer_norm") {
    // (input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    const at::Tensor& x = args[0].toTensor();
    const auto normalized = args[1].toIntVector();
    const int64_t axis = x.dim() - static_cast<int64_t>(normalized.size());
    if (axis < 0) return std::nullopt;
    std::vector<int64_t> stat(x.sizes().begin(), x.sizes().begin() + axis);
    stat.resize(x.dim(), 1);
    return std::vector<at::Tensor>{like(x.sizes(), x.scalar_type()),
                                   like(stat, x.scalar_type()), like(stat, x.scalar_type())};
  }
  if (name == "aten::native_layer_norm_backward") {
    // (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    const at::Tensor& x = args[1].toTensor();
    const auto mask = args[7].to<std::vector<bool>>();
    const at::Tensor* w = tensor(5);
    const at::Tensor* b = tensor(6);
    if ((mask[1] && w == nullptr) || (mask[2] && b == nullptr)) return std::nullopt;
    return std::vector<at::Tensor>{
        mask[0] ? like(x.sizes(), x.scalar_type()) : at::Tensor(),
        mask[1] ? like(w->sizes(), w->scalar_type()) : at::Tensor(),
        mask[2] ? like(b->sizes(), b->scalar_type()) : at::Tensor()};
  }
  if (name == "aten::index_select") {
    // (self, dim, index)
    const at::Tensor& x = args[0].toTensor();
    if (x.dim() == 0) return std::nullopt;
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), x.dim());
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[dim] = args[2].toTensor().numel();
    return std::vector<at::Tensor>{like(sizes, x.scalar_type())};
  }
  if (name == "aten::embedding_dense_backward") {
    // (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    const at::Tensor& g = args[0].toTensor();
    if (g.dim() == 0) return std::nullopt;
    return std::vector<at::Tensor>{like({args[2].toInt(), g.size(-1)}, g.scalar_type())};
  }
  if (name == "aten::mse_loss") {
    // (self, target, reduction): the loss per element (broadcast), or its mean / sum
    const at::Tensor& x = args[0].toTensor();
    const at::Tensor& t = args[1].toTensor();
    const c10::ScalarType dtype = at::result_type(x, t);  // as TensorIterator promotes
    if (args[2].toInt() != 0) return std::vector<at::Tensor>{like({}, dtype)};
    return std::vector<at::Tensor>{like(at::infer_size(x.sizes(), t.sizes()), dtype)};
  }
  if (name == "aten::nansum" && args[1].isIntList() && args[1].toIntList().empty()) {
    // (self, dim, keepdim, dtype): the CPU kernel reduces every dimension for dim=[] (as sum
    // does); PyTorch's meta kernel reduces none, which recorded a result of the input's shape.
    const at::Tensor& x = args[0].toTensor();
    const c10::ScalarType dtype =
        !args[3].isNone() ? args[3].toScalarType()
        : c10::isIntegralType(x.scalar_type(), /*includeBool=*/true) ? c10::kLong
                                                                      : x.scalar_type();
    std::vector<int64_t> sizes;
    if (args[2].toBool()) sizes.assign(x.dim(), 1);
    return std::vector<at::Tensor>{like(sizes, dtype)};
  }
  if (name == "aten::mse_loss_backward") {
    // (grad_output, self, target, reduction)
    const at::Tensor& x = args[1].toTensor();
    return std::vector<at::Tensor>{like(x.sizes(), x.scalar_type())};
  }
  return std::nullopt;
}

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

// An op that runs now: first the pending work it depends on, then memory for its pending
// arguments.
void prepare_to_run(State& s, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    FlushReason reason, const std::string& name = {}) {
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

// True when `bytes` more on `device` would not fit next to what is allocated and what the
// live pending storages will need. Then everything pending is given memory now (counted as
// "memory pressure") and the op runs at once, as in strict eager: if its result does not fit,
// out of memory is raised at the op that asked for the memory, with the allocator's message,
// and nothing recorded is lost.
// The same for the host, whose memory backs every simulated HBM: when the pending storages of
// all devices and `bytes` more come near what the host has, the memory is taken now, so that a
// host out of memory is raised at the op too, not later at a synchronization.
bool host_memory_pressure(size_t bytes) {
  static const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                                  static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  int64_t pending = static_cast<int64_t>(bytes);
  for (int d = 0; d < runtime::device_count() && d < static_cast<int>(kMaxDevices); ++d) {
    pending += g_pending_bytes[d].load(std::memory_order_relaxed);
  }
  if (pending < physical / 4) return false;  // (cheap: only large requests read /proc/meminfo)
  int64_t available = physical;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) {
        available = static_cast<int64_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  return pending > available;
}

bool memory_pressure(c10::Device device, size_t bytes) {
  const auto index = static_cast<size_t>(device.index());
  const int64_t needed = g_pending_bytes[index].load(std::memory_order_relaxed) +
                         static_cast<int64_t>(runtime::Allocator::round_size(bytes)) +
                         static_cast<int64_t>(runtime::allocator().allocated_bytes(device.index()));
  if (needed <= runtime::hbm_capacity_bytes() && !host_memory_pressure(bytes)) return false;
  TORCHTPU_COUNT("defer.memory_pressure");
  materialize_all(FlushReason::memory_pressure);
  return true;
}

// native_dropout(input, p, train) in training, recorded without a graph break: its mask is
// drawn at once into a fresh tensor (a random op that touches nothing pending runs in program
// order without flushing), and the rest is recorded as element-wise ops: the decomposition that
// the strict and debug kernel runs too (aten::dropout_on_device), so every mode gives the same
// numbers for one seed.
bool record_dropout(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 3);
  if (!args[0].isTensor()) return false;
  auto decomposed = aten::dropout_on_device(args[0].toTensor(), args[1].toDouble(),
                                            args[2].toOptional<bool>());
  if (!decomposed) return false;
  TORCHTPU_COUNT("defer.dropouts_recorded");
  torch::jit::drop(*stack, 3);
  stack->push_back(std::move(std::get<0>(*decomposed)));
  stack->push_back(std::move(std::get<1>(*decomposed)));
  return true;
}

// Factories: a tensor over a pending storage, unless the allocator must see the request now (an
// empty tensor, a request larger than the HBM, memory pressure: out of memory at the op).
bool record_factory(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    const std::string& name) {
  // empty.memory_format(size, dtype, layout, device, pin_memory, memory_format)
  // empty_strided(size, stride, dtype, layout, device, pin_memory)
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const bool strided = num_args == 6 && schema.arguments()[1].name() == "stride";
  auto args = torch::jit::last(*stack, num_args);
  const size_t k = strided ? 2 : 1;
  const auto dtype = args[k].toOptional<c10::ScalarType>();
  const auto layout = args[k + 1].toOptional<c10::Layout>();
  auto device = args[k + 2].toOptional<c10::Device>();
  const auto pin = args[k + 3].toOptional<bool>();
  if (c10::layout_or_default(layout) != c10::Layout::Strided || pin.value_or(false)) return false;
  const at::DimVector size = args[0].toDimVector();
  at::DimVector strides;
  c10::ScalarType scalar_type = c10::dtype_or_default(dtype);
  size_t nbytes = 0;
  const auto format = strided ? std::nullopt : args[5].toOptional<c10::MemoryFormat>();
  const bool plain = !strided && format.value_or(c10::MemoryFormat::Contiguous) ==
                                     c10::MemoryFormat::Contiguous;
  if (plain && std::all_of(size.begin(), size.end(), [](int64_t n) { return n >= 0; })) {
    // (The result of an element-wise op's generic kernel: contiguous, sized here.)
    strides = c10::contiguous_strides(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, c10::elementSize(scalar_type));
  } else {
    at::Tensor meta;
    if (strided) {
      meta = at::detail::empty_strided_meta(size, args[1].toDimVector(), dtype, std::nullopt,
                                            std::nullopt, std::nullopt);
    } else {
      meta = at::detail::empty_meta(size, dtype, std::nullopt, std::nullopt, std::nullopt,
                                    format);
    }
    strides.assign(meta.strides().begin(), meta.strides().end());
    scalar_type = meta.scalar_type();
    nbytes = meta.storage().nbytes();
  }
  if (nbytes == 0 || static_cast<int64_t>(nbytes) > runtime::hbm_capacity_bytes()) return false;
  c10::Device d = c10::device_or_default(device);
  if (!d.has_index()) d = c10::Device(c10::kPrivateUse1, runtime::current_device());
  if (d.index() >= runtime::device_count()) return false;  // the kernel raises
  if (memory_pressure(d, nbytes)) return false;  // allocated now: out of memory at the op
  runtime::metrics::add_lasting(runtime::metrics::Category::op, name);  // (recorded)
  at::Tensor t = make_pending_tensor(d, size, strides, scalar_type, nbytes);
  torch::jit::drop(*stack, num_args);
  stack->push_back(std::move(t));
  return true;
}

// The one decision of fused eager for an op that is not a view, a factory or a recorded dropout:
// record it (on `device`, with `new_results` sized), or run it now, after the recorded work it
// touches (`reason`).
struct Decision {
  std::optional<FlushReason> run_now;
  c10::Device device{c10::kPrivateUse1, 0};
  std::vector<at::Tensor> new_results;  // meta tensors (Capture::new_results)
  std::vector<std::pair<size_t, c10::IValue>> constants;  // integer results, by position
};

// Why the op entering now was made to run at once (runtime::OpModeScope::run_synchronously).
FlushReason forced_reason() {
  return aten::unsigned_at_once() ? FlushReason::unsigned_at_once : FlushReason::argument_check;
}

Decision decide(const c10::OperatorHandle& op, torch::jit::Stack* stack, Capture capture,
                const std::string& name, const aten::OpTraits& traits) {
  Decision d;
  if (runtime::OpModeScope::forced()) {  // (met here while capturing a program)
    d.run_now = forced_reason();
    return d;
  }
  switch (capture) {
    case Capture::host_read: d.run_now = FlushReason::host_read; return d;
    case Capture::random: d.run_now = FlushReason::random_op; return d;
    case Capture::fallback: d.run_now = FlushReason::cpu_fallback; return d;
    case Capture::none: d.run_now = FlushReason::unknown_op; return d;
    default: break;
  }
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  if (capture == Capture::copy) {
    const at::Tensor& src = args[0].toTensor();
    const at::Tensor& dst = args[1].toTensor();
    const bool src_tpu = src.device().is_privateuseone();
    const bool dst_tpu = dst.device().is_privateuseone();
    if (!(src_tpu && dst_tpu && src.device() == dst.device() && dst.numel() > 0)) {
      d.run_now = dst_tpu && !src_tpu ? FlushReason::host_to_device_copy : FlushReason::host_read;
      return d;
    }
  }
  // (raises CUDA's device-mismatch error)
  const auto device = aten::common_device(name, args, op.schema());
  if (!device.has_value() || !device->is_privateuseone()) {
    d.run_now = FlushReason::unknown_op;
    return d;
  }
  d.device = *device;
  if (capture == Capture::results_are_arguments) {
    size_elementwise_out(schema, traits, args, *device);  // (an empty out= of an element-wise op)
    for (size_t i = 0; i < num_args; ++i) {
      if (!schema.arguments()[i].is_out()) continue;
      if (!args[i].isTensor() || args[i].toTensor().numel() == 0) {
        d.run_now = FlushReason::out_sized_by_kernel;
        return d;
      }
    }
  }
  if (!mxu_recordable(traits, args)) {
    d.run_now = FlushReason::matmul_at_once;
    return d;
  }
  if (capture != Capture::new_results) return d;
  if (traits.sizing == aten::Sizing::like_input) {
    // (relu) The result is laid out as TensorIterator lays it out (like the input when dense),
    // in its dtype: no meta call.
    const at::Tensor& x = args[0].toTensor();
    d.new_results.push_back(x.is_non_overlapping_and_dense()
                                ? at::detail::empty_strided_meta(x.sizes(), x.strides(),
                                                                 x.scalar_type(), std::nullopt,
                                                                 std::nullopt, std::nullopt)
                                : elementwise_result_meta({x}, x.scalar_type()));
    return d;
  }
  auto meta = traits.sizing == aten::Sizing::rule ? sized_here(name, args) : std::nullopt;
  if (!meta) meta = aten::attention_meta_results(name, args, &d.constants);
  if (!meta) {
    // (Python meta kernels cost about a millisecond each: counted, with their time.)
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    meta = aten::meta_results(op, *stack, &why, &d.constants);
    runtime::metrics::count("defer.meta_calls." + name);
    TORCHTPU_COUNT("defer.meta_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
  }
  if (!meta) {
    d.run_now = FlushReason::no_meta_kernel;
    return d;
  }
  d.new_results = std::move(*meta);
  return d;
}

bool has_sparse_argument(const torch::jit::Stack& stack, size_t num_args) {
  auto sparse = [](const at::Tensor& t) {
    return t.defined() && t.layout() != c10::kStrided;
  };
  for (auto it = stack.end() - num_args; it != stack.end(); ++it) {
    if (it->isTensor()) {
      if (sparse(it->toTensor())) return true;
    } else if (it->isTensorList()) {
      for (const at::Tensor& t : it->toTensorList()) {
        if (sparse(t)) return true;
      }
    }
  }
  return false;
}

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

std::atomic<LocationProvider> g_location_provider{nullptr};
std::atomic<bool> g_record_locations{runtime::env::get("TORCHTPU_DEFER_LOCATIONS").value_or("0") == "1"};

std::string current_location() {
  LocationProvider p = g_location_provider.load();
  return p == nullptr ? std::string() : p();
}

struct Installer {
  Installer() {
    static PendingGraph graph;
    aten::set_entry_hook(&on_entry);
    runtime::register_deferred_work(&graph);
  }
} installer;

}  // namespace

std::pair<std::shared_ptr<PendingStorage>, c10::Storage> make_pending_storage(c10::Device device,
                                                                          size_t nbytes) {
  State& s = state();
  auto record = std::make_shared<PendingStorage>();
  record->device = device;
  record->nbytes = nbytes;
  c10::DataPtr data(pending_address(), new Token{record}, &token_deleter, device);
  auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                    std::move(data), &runtime::allocator(),
                                                    /*resizable=*/true);
  impl->set_materializer(&materialize_on_access);
  record->impl.emplace(impl);
  count_pending(*record);
  {
    auto lock = runtime::lock_without_gil(s.mutex);
    record->id = s.next_id++;
    if (s.registry.size() > 4096) prune_registry(s);
    s.registry.emplace(record->id, record);
    s.any_pending.store(true);
  }
  return {std::move(record), c10::Storage(std::move(impl))};
}

std::shared_ptr<PendingStorage> pending_of(const c10::Storage& storage) {
  if (!storage) return nullptr;
  const c10::DataPtr& data = storage.data_ptr();
  if (data.get_deleter() != &token_deleter) return nullptr;
  return static_cast<Token*>(data.get_context())->record;
}

bool is_pending(const c10::Storage& storage) { return pending_of(storage) != nullptr; }

bool materialize(PendingStorage& record) {
  if (record.materialized.load()) return true;
  if (record.dead.load()) return false;
  // (Under the graph's lock: two threads must not give one storage two blocks.)
  auto lock = runtime::lock_without_gil(state().mutex);
  c10::intrusive_ptr<c10::StorageImpl> impl = record.impl->lock();
  if (!impl) return false;
  if (impl->data_ptr().get_deleter() != &token_deleter) return true;
  give_memory(record, *impl,
              runtime::allocator().allocate_on(record.device.index(), impl->nbytes()));
  return true;
}

void give_memory(PendingStorage& record, c10::StorageImpl& impl, c10::DataPtr memory) {
  record.materialized.store(true);
  uncount_pending(record);
  impl.set_data_ptr_noswap(std::move(memory));  // the token goes; the record stays alive
  impl.clear_materializer();
}

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

void set_location_provider(LocationProvider provider) { g_location_provider.store(provider); }
void set_record_locations(bool on) { g_record_locations.store(on); }
bool record_locations() { return g_record_locations.load(std::memory_order_relaxed); }

void set_max_pending_ops(int64_t n) {
  TORCH_CHECK_VALUE(n >= 1, "the pending graph size limit must be at least 1, got ", n);
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  s.max_ops = n;
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

// ---------------------------------------------------------------------------------------------
// Compiled programs (Program.h): the capture; the lowering is Lowering.cpp's.

namespace torchtpu::defer {

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

}  // namespace torchtpu::defer
