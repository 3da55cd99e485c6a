#include "runtime/Mode.h"

#include "runtime/Env.h"
#include "runtime/DeferredWork.h"

#include <atomic>

namespace torchtpu::runtime {
namespace {

EagerMode initial_mode() {
  if (auto v = env::get("TORCHTPU_EAGER_MODE")) return eager_mode_from_name(*v);
  // TorchTPU's variable; TORCH_TPU_DEFER_AND_FUSE is the name torchtpu used for it before.
  if (env::value("TPU_DEFER_AND_FUSE") == "1" ||
      env::value("TORCH_TPU_DEFER_AND_FUSE") == "1") {
    return EagerMode::fused;
  }
  if (env::value("TPU_LAUNCH_BLOCKING") == "1") return EagerMode::debug;
  return EagerMode::strict;
}

std::atomic<EagerMode>& mode_slot() {
  static std::atomic<EagerMode> mode{initial_mode()};
  return mode;
}

std::atomic<bool>& nan_slot() {
  static std::atomic<bool> on{env::value("TORCHTPU_CHECK_NANS") == "1"};
  return on;
}

thread_local int t_op_mode = -1;  // OpModeScope, or -1
thread_local bool t_op_forced = false;  // OpModeScope::run_synchronously() in this op

}  // namespace

EagerMode eager_mode() {
  if (t_op_mode >= 0) return static_cast<EagerMode>(t_op_mode);
  return mode_slot().load(std::memory_order_relaxed);
}

OpModeScope::OpModeScope() : outermost_(t_op_mode < 0) {
  if (outermost_) t_op_mode = static_cast<int>(eager_mode());
}
OpModeScope::~OpModeScope() {
  if (outermost_) {
    t_op_mode = -1;
    t_op_forced = false;
  }
}

void OpModeScope::run_synchronously() {
  if (t_op_mode < 0) return;  // (outside an op)
  t_op_mode = static_cast<int>(EagerMode::debug);
  t_op_forced = true;
}

bool OpModeScope::forced() { return t_op_forced; }

SynchronousScope::SynchronousScope() : previous_(t_op_mode) {
  t_op_mode = static_cast<int>(EagerMode::debug);
}
SynchronousScope::~SynchronousScope() { t_op_mode = previous_; }

void set_eager_mode(EagerMode mode) {
  // Work recorded by fused eager runs first and every pending tensor gets its memory.
  if (mode != EagerMode::fused) materialize_deferred_work(FlushReason::mode_switch);
  mode_slot().store(mode);
}

const char* name(EagerMode mode) {
  switch (mode) {
    case EagerMode::debug: return "debug";
    case EagerMode::strict: return "strict";
    case EagerMode::fused: return "fused";
  }
  return "strict";
}

EagerMode eager_mode_from_name(const std::string& n) {
  if (n == "debug") return EagerMode::debug;
  if (n == "strict") return EagerMode::strict;
  if (n == "fused") return EagerMode::fused;
  TORCH_CHECK_VALUE(false, "Unknown eager mode '", n, "'; expected 'debug', 'strict' or 'fused'");
}

namespace {
std::atomic<bool>& dry_slot() {
  static std::atomic<bool> on{env::value("TORCHTPU_DRY_RUN") == "1"};
  return on;
}
}  // namespace

bool dry_run() { return dry_slot().load(std::memory_order_relaxed); }
void set_dry_run(bool on) { dry_slot().store(on); }

bool check_nans() { return nan_slot().load(std::memory_order_relaxed); }
void set_check_nans(bool on) { nan_slot().store(on); }

}  // namespace torchtpu::runtime
