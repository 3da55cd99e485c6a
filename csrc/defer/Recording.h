#pragma once
// The recording stages of fused eager (docs/design.md 3.1, Defer.h): the pending graph's state,
// one per process under one mutex, and what each stage promises to the others. Internal to
// defer/; one file per stage:
//
//   PendingStorage.cpp  storages without memory: their tensors, their bytes, memory pressure,
//                       the materializer that gives one memory when Python asks for it
//   Fingerprint.cpp     the operands of a recorded op and the graph's structural hash
//   ResultSizing.cpp    the sizes and strides of what an op returns (or of an empty out=)
//   Decision.cpp        record the op or run it now; factories and dropout recorded apart
//   Recorder.cpp        the entry hook (aten/Entry.h) and the recording of one node
//   Flush.cpp           taking the graph to run it (Lowering.cpp), materialization points
//   Programs.cpp        compiled programs (Program.h): capture, lowering and replay
//   RepeatedOps.cpp     loop detection: the graph cut where the op stream repeats itself
#include "aten/Entry.h"
#include "aten/OpTraits.h"
#include "defer/Defer.h"
#include "defer/Graph.h"
#include "runtime/DeferredWork.h"
#include "runtime/Env.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace torchtpu::defer {

// ---------------------------------------------------------------------------------------------
// The pending graph's state

// The loop detection set by TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS when the process starts
// (RepeatedOps.cpp).
RepeatedOps initial_repeated_ops();

// The signatures of the last recorded ops, searched for a repetition (RepeatedOps.cpp).
struct RepeatWindow {
  std::deque<size_t> history;
  size_t sleep = 0;      // ops to record before the next search
  size_t last_body = 0;  // the length of the last repetition found, tried first
  // Appends an op's signature; true when it ends a sequence repeated twice in a row.
  bool push(size_t signature);
  void reset();
};

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
  int64_t max_ops = runtime::env::int_value("TORCHTPU_DEFER_MAX_OPS");
  RepeatedOps repeated_ops = initial_repeated_ops();
  RepeatWindow repeats;
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

// The process's pending graph (Flush.cpp); never destroyed: tensors may die after static
// destruction.
State& state();

// ---------------------------------------------------------------------------------------------
// PendingStorage.cpp

// A TPU tensor over a fresh pending storage of `nbytes` (make_pending_storage, Graph.h).
at::Tensor make_pending_tensor(c10::Device device, c10::IntArrayRef sizes,
                               c10::IntArrayRef strides, c10::ScalarType dtype, size_t nbytes);

// c10's storage materializer installed on every pending storage: a Python caller that asks for
// the storage's memory first runs the recorded work, then the storage gets memory. Ops that ask
// for data pointers inside kernels or without the GIL leave it pending (and c10 clears the
// materializer after each call: make_operand installs it again).
void materialize_on_access(c10::StorageImpl* impl);

// Drops the registry's records that are dead or materialized (caller holds the mutex).
void prune_registry(State& s);

// True when `bytes` more on `device` would not fit next to what is allocated and what the live
// pending storages will need (or the host's memory is near its end): then everything pending
// has been given memory (materialize_all, counted as "memory pressure") and the op must run at
// once, so that out of memory is raised at the op that asked for the memory.
bool memory_pressure(c10::Device device, size_t bytes);

// ---------------------------------------------------------------------------------------------
// Fingerprint.cpp: the structural hash of the pending graph is folded op by op into
// State::fingerprint; it covers the op sequence, the operands' shapes, strides, dtypes and
// aliasing (local ids of pending and external storages), and the non-scalar arguments. Scalars
// (Scalar and float arguments) are runtime values and are not hashed.

// Hashes one non-tensor argument into `h`.
void hash_ivalue(size_t& h, const c10::IValue& v);
// A Scalar, float or complex argument (optional or not): a value of the run, never hashed.
bool is_runtime_scalar(const c10::Argument& a);
// `fingerprint` with the op folded in: its name, its stream and device, its non-tensor
// arguments but the runtime scalars. (Its operands are folded in by make_operand.)
size_t hash_op(size_t fingerprint, const std::string& name, c10::StreamId stream,
               c10::Device device, const c10::FunctionSchema& schema,
               const torch::jit::Stack& args);
// The operand of `t` in the graph (a view of a pending storage, an external tensor, or the value
// now of a CPU scalar), its local id and geometry hashed into `h` (caller holds the mutex).
Operand make_operand(State& s, const at::Tensor& t, size_t& h);

// Which operands (in visit order) each argument owns.
using OperandRanges = c10::SmallVector<std::pair<size_t, size_t>, 8>;
OperandRanges operand_ranges(const torch::jit::Stack& args);

// ---------------------------------------------------------------------------------------------
// ResultSizing.cpp

// The result an element-wise kernel's TensorIterator allocates for these inputs, as a meta
// tensor: their broadcast shape, laid out in the inputs' memory order. 0-d CPU tensors are
// scalars and take no part.
at::Tensor elementwise_result_meta(const std::vector<at::Tensor>& inputs, c10::ScalarType dtype);

// An element-wise out= op given an empty out tensor: the out tensor gets the shape and layout the
// kernel would resize it to, over a pending storage. Other ops and out= tensors: untouched.
void size_elementwise_out(const c10::FunctionSchema& schema, const aten::OpTraits& traits,
                          c10::ArrayRef<c10::IValue> args, c10::Device device);

// The meta results of an op returning new tensors (Capture::new_results): laid out as
// TensorIterator lays out its input (Sizing::like_input), sized here as the CPU kernel sizes them
// (Sizing::rule, the hottest ops), by the attention sizing (aten/DryRun.h), else by the op's meta
// kernel (counted as defer.meta_calls, with its time); nullopt when it has none. `constants`:
// the integer results, by position.
std::optional<std::vector<at::Tensor>> new_results_meta(
    const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name,
    const aten::OpTraits& traits, std::vector<std::pair<size_t, c10::IValue>>* constants);

// ---------------------------------------------------------------------------------------------
// Decision.cpp

// The one decision of fused eager for an op that is not a view, a factory or a recorded dropout:
// record it (on `device`, with `new_results` sized), or run it now, after the recorded work it
// touches (`run_now`, the reason).
struct Decision {
  std::optional<runtime::FlushReason> run_now;
  c10::Device device{c10::kPrivateUse1, 0};
  std::vector<at::Tensor> new_results;  // meta tensors (Capture::new_results)
  std::vector<std::pair<size_t, c10::IValue>> constants;  // integer results, by position
};
Decision decide(const c10::OperatorHandle& op, torch::jit::Stack* stack, aten::Capture capture,
                const std::string& name, const aten::OpTraits& traits);

// Why the op entering now was made to run at once (runtime::OpModeScope::run_synchronously).
runtime::FlushReason forced_reason();

// A factory recorded as a tensor over a pending storage (the stack then holds it); false when the
// allocator must see the request now (an empty tensor, a request larger than the HBM, memory
// pressure).
bool record_factory(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    const std::string& name);
// native_dropout in training recorded as its element-wise decomposition, its mask drawn now;
// false when it is not decomposed (the stack is then untouched).
bool record_dropout(torch::jit::Stack* stack);
// Whether an in-place foreach op is recorded as one node rather than as its per-tensor ops.
bool foreach_as_one_node(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// Whether an argument is a sparse tensor (or a list holding one).
bool has_sparse_argument(const torch::jit::Stack& stack, size_t num_args);
// A random op that fills its arguments (bernoulli_, normal_, ...), rather than returning new
// tensors.
bool random_op_writes_arguments(const c10::FunctionSchema& schema);

// ---------------------------------------------------------------------------------------------
// Recorder.cpp

// Records the op as a node of the pending graph (caller holds the mutex): its operands, what it
// writes, its results over fresh pending storages (replacing its arguments on the stack), its
// element-wise shape; folds it into the fingerprint; flushes at the graph size limit.
// `new_results`: the meta results (for Capture::new_results), else empty.
void record(State& s, const c10::OperatorHandle& op, torch::jit::Stack* stack,
            aten::Capture capture, const std::string& name, const aten::OpTraits& traits,
            c10::Device device, std::vector<at::Tensor> new_results,
            const std::vector<std::pair<size_t, c10::IValue>>& constants, std::string location);

// The user's Python line, from the location provider (Defer.h); empty without one. Takes the
// GIL: call it before taking the mutex.
std::string current_location();

// ---------------------------------------------------------------------------------------------
// Flush.cpp

// Sets State::any_pending from the nodes and the registry (caller holds the mutex).
void update_any_pending(State& s);
// Takes the recorded nodes and their fingerprint out of the pending graph, leaving it empty
// (caller holds the mutex).
std::pair<std::vector<Node>, uint64_t> take_nodes(State& s);
// Runs the recorded nodes, if any, for `reason` (caller holds the mutex); fails a capture.
void flush_locked(State& s, runtime::FlushReason reason);
// An op that runs now: first the pending work it touches (flushed, counted for `reason` with
// `name`), then memory for its pending arguments.
void prepare_to_run(State& s, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    runtime::FlushReason reason, const std::string& name = {});

// ---------------------------------------------------------------------------------------------
// RepeatedOps.cpp

// What makes two recorded ops the same op of a loop body: the name, the non-scalar arguments,
// the operands' sizes and dtypes (not their values, strides or places in the graph).
size_t op_signature(const std::string& name, const c10::FunctionSchema& schema,
                    const torch::jit::Stack& args, const std::vector<Operand>& operands);

// ---------------------------------------------------------------------------------------------
// Programs.cpp: the capture of a compiled program (Program.h)

// This thread captures a program: it records in any eager mode.
extern thread_local bool t_capturing;
// The capture cannot become a program: its graph will run op by op; the capturing thread stops
// recording in a mode where it would not (caller holds the mutex).
void fail_capture(State& s, const std::string& why);
// An op of a graph being captured that runs at once instead of being recorded is folded into
// the program as a constant when it reads no graph input and nothing pending; otherwise the
// capture fails and what it recorded runs first.
void fold_or_fail(State& s, const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  const std::string& why, bool random = false);

}  // namespace torchtpu::defer
