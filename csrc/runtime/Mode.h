#pragma once
// The eager execution mode (DESIGN.md section 3).
//
//   debug  : every op runs synchronously on the calling thread; errors are raised at the
//            faulting op; TORCHTPU_CHECK_NANS=1 names the first op that produced a NaN or Inf.
//   strict : (default) device work is enqueued on the current stream of its device and run by
//            the stream's worker thread; the host returns at once; errors surface at the next
//            synchronization, naming the op.
//   fused  : DeferAndFuse (not implemented yet: selecting it raises).
//
// Initial mode: TORCHTPU_EAGER_MODE ("debug", "strict", "fused"); TorchTPU's variables are
// honoured too: TPU_LAUNCH_BLOCKING=1 selects debug, TORCH_TPU_DEFER_AND_FUSE=1 fused.
#include <string>

namespace torchtpu::runtime {

enum class EagerMode { debug, strict, fused };

EagerMode eager_mode();
// Strict and fused eager enqueue device work on streams; debug eager runs it inline.
inline bool asynchronous() { return eager_mode() != EagerMode::debug; }
void set_eager_mode(EagerMode mode);
const char* name(EagerMode mode);
EagerMode eager_mode_from_name(const std::string& name);

// TORCHTPU_CHECK_NANS=1 (or set_check_nans): in debug mode, results are checked for NaN/Inf.
bool check_nans();
void set_check_nans(bool on);

}  // namespace torchtpu::runtime
