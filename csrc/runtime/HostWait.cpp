#include "runtime/HostWait.h"

#include <atomic>

namespace torchtpu::runtime {
namespace {
std::atomic<WithoutGilHook> g_without_gil{nullptr};
std::atomic<InterruptHook> g_interrupt{nullptr};
std::atomic<bool> g_interrupted{false};
std::atomic<GilHeldHook> g_gil_held{nullptr};
thread_local int t_no_interrupt = 0;
}  // namespace

NoInterrupt::NoInterrupt() { ++t_no_interrupt; }
NoInterrupt::~NoInterrupt() { --t_no_interrupt; }

WithoutGilHook without_gil_hook() { return g_without_gil.load(std::memory_order_acquire); }
void set_without_gil_hook(WithoutGilHook hook) { g_without_gil.store(hook); }
void set_gil_held_hook(GilHeldHook hook) { g_gil_held.store(hook); }
bool thread_holds_gil() {
  GilHeldHook hook = g_gil_held.load(std::memory_order_acquire);
  return hook != nullptr && hook();
}
void set_interrupt_hook(InterruptHook hook) { g_interrupt.store(hook); }

void check_interrupt() {
  InterruptHook hook = g_interrupt.load(std::memory_order_acquire);
  if (hook == nullptr || t_no_interrupt > 0) return;
  try {
    hook();
  } catch (...) {
    g_interrupted.store(true);
    throw;
  }
}

bool interrupted_once() { return g_interrupted.load(); }

namespace {
std::atomic<StopsProgramHook> g_stops_program{nullptr};
}  // namespace
void set_stops_program_hook(StopsProgramHook hook) { g_stops_program.store(hook); }
bool stops_program(std::exception_ptr error) {
  StopsProgramHook hook = g_stops_program.load(std::memory_order_acquire);
  return hook != nullptr && error != nullptr && hook(error);
}

}  // namespace torchtpu::runtime
