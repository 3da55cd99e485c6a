#pragma once
// The eager execution mode (docs/design.md 3).
//
//   debug  : every op runs synchronously on the calling thread; errors are raised at the
//            faulting op; TORCHTPU_CHECK_NANS=1 names the first op that produced a NaN or Inf.
//   strict : (default) device work is enqueued on the current stream of its device and run by
//            the stream's worker thread; the host returns at once; errors surface at the next
//            synchronization, naming the op.
//   fused  : DeferAndFuse: ops are recorded and run as fused regions at materialization points
//            (defer/Defer.h).
//
// Initial mode: TORCHTPU_EAGER_MODE ("debug", "strict", "fused"); TorchTPU's variables are
// honoured too: TPU_LAUNCH_BLOCKING=1 selects debug, TPU_DEFER_AND_FUSE=1 fused.
//
// Threads (docs/eager-modes.md, "Threads"): the mode is the process's (autograd runs backward
// on threads of its own, which must run in the forward pass's mode). An op reads the mode once,
// when it enters torchtpu (OpModeScope), and it and every op it calls run in that mode, so a
// switch made by another thread never changes the mode halfway through an op. A synchronous (debug) op first
// waits for the work queued on its device, and an op that is not recorded first runs the
// recorded work it touches, so ops of different modes stay in program order.
#include <string>

namespace torchtpu::runtime {

enum class EagerMode { debug, strict, fused };

// The mode of the calling thread's current op, else of the process.
EagerMode eager_mode();
// Strict and fused eager enqueue device work on streams; debug eager runs it inline.
inline bool asynchronous() { return eager_mode() != EagerMode::debug; }
// The one way to set the mode (the Python and C++ APIs call it): leaving fused eager first runs
// the recorded work and gives every pending tensor its memory.
void set_eager_mode(EagerMode mode);

// Fixes the mode for the op entering torchtpu on this thread (the outermost scope wins).
class OpModeScope {
 public:
  OpModeScope();
  ~OpModeScope();
  OpModeScope(const OpModeScope&) = delete;
  OpModeScope& operator=(const OpModeScope&) = delete;
  // The op entering now (inside its outermost scope) runs as in debug eager: synchronously, its
  // errors raised at the call, after the work queued or recorded before it. For a call whose
  // arguments the op's meta kernel refused (aten/CallChecks.cpp). `forced()` says so.
  static void run_synchronously();
  static bool forced();

 private:
  bool outermost_;
};

// While one is alive on this thread, every op the thread issues runs as in debug eager
// (synchronously, its results with memory and values): for code that reads and writes device
// memory itself between its ops, a C++ extension's op torchtpu has no kernel for
// (api::ForeignOp). Nests.
class SynchronousScope {
 public:
  SynchronousScope();
  ~SynchronousScope();
  SynchronousScope(const SynchronousScope&) = delete;
  SynchronousScope& operator=(const SynchronousScope&) = delete;

 private:
  int previous_;
};
const char* name(EagerMode mode);
EagerMode eager_mode_from_name(const std::string& name);

// Dry runs (docs/insight.md, "Dry runs"): while on, device tensors get memory that is only an
// address (the allocator's dry blocks: counted against the simulated HBM, never backed by host
// memory), and every op computes its results' metadata and is charged to the cost model without
// running (aten/DryRun.h). TORCHTPU_DRY_RUN=1 turns it on for the process; torchtpu.dry_run()
// for a block. Process-wide.
bool dry_run();
void set_dry_run(bool on);

// TORCHTPU_CHECK_NANS=1 (or set_check_nans): in debug mode, results are checked for NaN/Inf.
bool check_nans();
void set_check_nans(bool on);

}  // namespace torchtpu::runtime
