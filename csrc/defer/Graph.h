#pragma once
// The pending graph of fused eager: pending storages, recorded ops, and the plan of a graph.
// Internal to defer/.
#include "aten/Entry.h"
#include "aten/OpTraits.h"
#include "defer/Program.h"
#include "runtime/DeferredWork.h"
#include "sim/Mxu.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/StorageImpl.h>
#include "pytorch/Internals.h"
#include <c10/util/SmallVector.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torchtpu::defer {

using Dims = c10::SmallVector<int64_t, 6>;

// A storage without memory yet. The tensors over it hold its StorageImpl (whose DataPtr is null
// and carries a token that marks the record dead when the last of them goes); the graph holds
// the record and a weak reference.
struct PendingStorage {
  uint64_t id = 0;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> impl;
  c10::Device device{c10::kPrivateUse1, 0};
  size_t nbytes = 0;
  std::atomic<bool> dead{false};          // no tensor refers to it any more
  std::atomic<bool> materialized{false};  // it has memory now (or is being given it)
  std::atomic<bool> counted{false};       // its bytes are in its device's pending bytes
};

// A fresh pending storage of `nbytes` on `device`, registered (PendingStorage.cpp).
std::pair<std::shared_ptr<PendingStorage>, c10::Storage> make_pending_storage(c10::Device device,
                                                                          size_t nbytes);

// Gives a pending storage (`impl`, the storage of `record`) its memory: the record is marked
// materialized and leaves the pending bytes, the token goes, the materializer is cleared.
void give_memory(PendingStorage& record, c10::StorageImpl& impl, c10::DataPtr memory);

// If `storage` is pending, its record.
std::shared_ptr<PendingStorage> pending_of(const c10::Storage& storage);
// Gives memory to a pending storage that tensors still refer to; false when it is dead.
bool materialize(PendingStorage& record);

// A tensor argument of a recorded op: an external (real) tensor or a view of a pending storage.
struct Operand {
  at::Tensor tensor;                        // external, or undefined
  std::shared_ptr<PendingStorage> pending;  // pending, or null
  Dims sizes, strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool conj = false, neg = false;  // a conjugate / negative view (only _copy_from sees them)
  bool read = true;      // the op reads it
  bool written = false;  // the op writes it
  bool defined() const { return pending != nullptr || tensor.defined(); }
};

// An operand with the geometry of `t` (sizes, strides, offset, dtype, conjugate / negative
// view) and nothing else.
inline Operand operand_geometry(const at::Tensor& t) {
  Operand o;
  o.sizes.assign(t.sizes().begin(), t.sizes().end());
  o.strides.assign(t.strides().begin(), t.strides().end());
  o.offset = t.storage_offset();
  o.dtype = t.scalar_type();
  o.conj = t.is_conj();
  o.neg = t.is_neg();
  return o;
}

inline const std::string kUnnamed;

struct Node {
  c10::OperatorHandle op;
  // "aten::add.out": the name its kernel keeps for the process (aten/Entry.h), not a copy.
  const std::string* name = &kUnnamed;
  aten::Capture capture;
  torch::jit::Stack args;          // tensor slots hold undefined tensors; operands fill them
  std::vector<Operand> operands;   // the tensor slots of args, in visit order
  std::vector<Operand> results;    // new_results: the pending tensors returned
  c10::Device device{c10::kPrivateUse1, 0};
  c10::StreamId stream = 0;        // the current stream of `device` when the op was recorded
  bool elementwise = false;        // fusable: results have `shape`, operands broadcast to it
  // The op can raise on the values it reads (an index out of range, an integer division by
  // zero): never eliminated, so that fused eager reports what strict eager reports. Also set for
  // the ops that must run whatever reads their results: random ops (in programs) and collectives.
  bool checks_values = false;
  // The CPU kernel's warnings of the call were made at the call (aten::call_warned()): the op
  // runs with warnings dropped.
  bool warned_at_call = false;
  // torch.use_deterministic_algorithms when the op was recorded (the op runs under it).
  aten::DeterministicAlgorithms::Setting deterministic;
  Dims shape;
  std::string location;            // Python location, when recorded
  sim::Precision precision = sim::Precision::kHighest;  // float32 matmul precision when recorded
  const aten::OpTraits* traits = nullptr;  // the op's, when recorded (else found by name)
  explicit Node(const c10::OperatorHandle& h) : op(h) {}
};

inline const aten::OpTraits& traits_of(const Node& n) {
  return n.traits != nullptr ? *n.traits : aten::op_traits(*n.name);
}

// Calls f(at::Tensor&) for every tensor slot of `args` (tensors, tensor lists, optional tensor
// lists), in order, letting f replace the tensor.
template <typename F>
void for_each_tensor_slot(torch::jit::Stack& args, F&& f) {
  for (c10::IValue& slot : args) {
    if (slot.isTensor()) {
      at::Tensor t = slot.toTensor();
      f(t);
      slot = std::move(t);
    } else if (slot.isTensorList()) {
      c10::List<at::Tensor> list = slot.toTensorList().copy();
      for (size_t i = 0; i < list.size(); ++i) {
        at::Tensor t = list.get(i);
        f(t);
        list.set(i, std::move(t));
      }
      slot = std::move(list);
    } else if (slot.isOptionalTensorList()) {
      auto list = slot.toOptionalTensorList().copy();
      for (size_t i = 0; i < list.size(); ++i) {
        std::optional<at::Tensor> t = list.get(i);
        if (!t.has_value()) continue;
        f(*t);
        list.set(i, std::move(t));
      }
      slot = std::move(list);
    }
  }
}

// A graph runs its kernels itself (when it is flushed, or as a compiled program): the ops its
// kernels call internally are not the user's ops, and Python dispatch modes active around the
// call that flushed it (AOTAutograd's checks, a user's mode) do not see them, as they see none of
// the ops inside a kernel.
struct NoPythonDispatch {
  c10::impl::ExcludeDispatchKeyGuard guard{
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
};

// Lowering.cpp: plans (or finds the cached plan of) `nodes` and enqueues it.
// `fingerprint` identifies the graph's structure (without liveness).
void run_graph(std::vector<Node> nodes, uint64_t fingerprint, runtime::FlushReason reason);

// A TPU tensor over `storage` with the geometry of `o` (no dispatch; Executor.cpp).
at::Tensor device_view(const c10::Storage& storage, const Operand& o);

// Programs.cpp: the program of a captured graph (Program.h), run once on `inputs`.
Captured lower_program(std::vector<Node> nodes, uint64_t fingerprint,
                       const std::vector<at::Tensor>& inputs,
                       const std::vector<at::Tensor>& outputs, const std::string& name,
                       bool bucket, const Program* charged_as);

// Calls `f` with the recorded nodes, under the pending graph's lock: nothing is recorded or run
// meanwhile, and nothing is changed (Flush.cpp; for Inspect.cpp).
void visit_recorded_nodes(const std::function<void(const std::vector<Node>&)>& f);

// Counts a materialization: its reason's label (with the op, for reasons that name one) and the
// Python location (Flush.cpp).
void note_materialization(runtime::FlushReason reason, const std::string& op,
                          const std::string& location);

}  // namespace torchtpu::defer
