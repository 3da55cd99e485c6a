// The machinery every kernel runs through, and no kernel: the kernel entry's state (Entry.h:
// the entry hook fused eager installs, KernelScope, the call-warned flag,
// DeterministicAlgorithms) and the launch of device work (Launch.h: launch,
// launch_here_if_idle, LaunchNote, wait_for_device, check_results). How an op runs in each
// eager mode is decided here, in one place, for the kernels of every file (docs/design.md 3);
// it is kept apart from the kernels so that none of their ATen op headers is needed here.
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/OpenMP.h"
#include "runtime/Stream.h"
#include "sim/Ledger.h"

#include <ATen/Context.h>

#include <atomic>
#include <chrono>

namespace torchtpu::aten {

// ---------------------------------------------------------------------------------------------
// The kernel entry (Entry.h)

namespace {
std::atomic<EntryHook> g_entry_hook{nullptr};
thread_local int t_kernel_depth = 0;
thread_local bool t_call_warned = false;
}  // namespace

DeterministicAlgorithms::Setting DeterministicAlgorithms::Setting::now() {
  const auto& context = at::globalContext();
  return {context.deterministicAlgorithms(), context.deterministicAlgorithmsWarnOnly()};
}
DeterministicAlgorithms::DeterministicAlgorithms(Setting setting) {
  const Setting current = Setting::now();
  if (current.on == setting.on && current.warn_only == setting.warn_only) return;
  previous_ = current;
  at::globalContext().setDeterministicAlgorithms(setting.on, setting.warn_only);
}
DeterministicAlgorithms::~DeterministicAlgorithms() {
  if (previous_) at::globalContext().setDeterministicAlgorithms(previous_->on, previous_->warn_only);
}

bool call_warned() { return t_call_warned; }
void set_call_warned(bool warned) { t_call_warned = warned; }

void set_entry_hook(EntryHook hook) { g_entry_hook.store(hook); }
EntryHook entry_hook() { return g_entry_hook.load(std::memory_order_acquire); }
bool inside_kernel() { return t_kernel_depth > 0; }
KernelScope::KernelScope() { ++t_kernel_depth; }
KernelScope::~KernelScope() {
  if (--t_kernel_depth == 0) runtime::release_openmp_team();
}

// ---------------------------------------------------------------------------------------------
// Launching device work (Launch.h)

void wait_for_device(c10::Device device) {
  // (In debug eager too: work queued by strict ops of this or another thread runs first.)
  runtime::synchronize_device(device.index());
}

void check_results(const std::string& op, const std::vector<at::Tensor>& results) {
  if (!runtime::check_nans()) return;
  for (const auto& t : results) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    TORCH_CHECK(host_alias(t).isfinite().all().item<bool>(),
                "TORCHTPU_CHECK_NANS: ", op, " produced NaN or Inf (the first op to do so) on ",
                t.device());
  }
}

namespace {
thread_local std::string t_launch_note;
}  // namespace

LaunchNote::LaunchNote(std::string note) : previous_(std::move(t_launch_note)) {
  t_launch_note = std::move(note);
}
LaunchNote::~LaunchNote() { t_launch_note = std::move(previous_); }

bool launch_here_if_idle(c10::Device device, const std::string& op,
                         c10::function_ref<void()> work, bool parallel) {
  if (!runtime::asynchronous() || sim::tracing() || runtime::check_nans()) return false;
  auto& queue = runtime::queue_of(runtime::current_stream(device.index()));
  if (t_launch_note.empty()) return queue.run_here_if_idle(work, op, parallel);
  return queue.run_here_if_idle(work, op + t_launch_note, parallel);
}

void launch(c10::Device device, std::string op, std::function<void()> work,
            std::vector<at::Tensor> results, bool parallel) {
  if (sim::tracing()) {
    // torch.profiler records the device: the launch's event (traced when it was charged, under
    // the same name) gets the host time its work takes on this machine as an annotation.
    if (auto slot = sim::take_host_time_slot(op)) {
      work = [work = std::move(work), slot = std::move(slot)] {
        const auto start = std::chrono::steady_clock::now();
        work();
        slot->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count());
      };
    }
  }
  if (!t_launch_note.empty()) op += t_launch_note;
  if (runtime::asynchronous()) {
    if (runtime::check_nans() && !results.empty()) {
      // Strict eager checks on the stream, after the work: the first op that made a NaN or Inf
      // is reported at the next synchronization (the first error a stream keeps).
      work = [work = std::move(work), op, results = std::move(results)] {
        work();
        check_results(op, results);
      };
    }
    runtime::queue_of(runtime::current_stream(device.index()))
        .enqueue(std::move(work), std::move(op), {}, parallel);
    return;
  }
  // Debug eager runs the work now, after whatever strict ops (of another thread, or before a
  // mode switch) queued on the device.
  wait_for_device(device);
  {
    const runtime::metrics::HostTime timed(op);
    work();
  }
  check_results(op, results);
}

}  // namespace torchtpu::aten
