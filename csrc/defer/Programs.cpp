// Compiled programs (Program.h): the capture. begin_program() makes this thread record every op
// into the pending graph, whatever the eager mode; end_program() takes the recorded ops and hands
// them to Lowering.cpp, which plans them into a program.
#include "defer/Defer.h"
#include "defer/Program.h"
#include "defer/Recording.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"

#include <thread>

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
