#pragma once
#include <exception>
// How the host waits for the device (docs/design.md, "Host waits").
//
// Two rules keep waits safe in a Python process, and the Python bindings install the hooks that
// carry them out (the runtime itself never sees Python):
//
// 1. No thread waits for a torchtpu lock while it holds the GIL. A thread holding such a lock may
//    need the GIL (releasing the last reference to a tensor that Python also knew acquires it),
//    so a thread that waits with the GIL held could deadlock the process. without_gil(f) runs f
//    with the GIL released when the calling thread holds it.
// 2. A host wait for device work can be interrupted: it wakes up every few milliseconds and
//    calls check_interrupt(), which raises the pending KeyboardInterrupt (Ctrl-C) on Python's
//    main thread. The work already queued keeps running; the process stays usable.
#include "runtime/HostPolicy.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace torchtpu::runtime {

using WithoutGilHook = void (*)(void (*fn)(void*), void* context);
void set_without_gil_hook(WithoutGilHook hook);
WithoutGilHook without_gil_hook();

template <typename F>
void without_gil(F&& f) {
  WithoutGilHook hook = without_gil_hook();
  if (hook == nullptr) {
    f();
    return;
  }
  hook([](void* context) { (*static_cast<F*>(context))(); }, &f);
}

// Whether the calling thread holds the GIL (false without Python). A Python caller holds it when
// it asks for a tensor's memory (tensor.data_ptr(), torch.save); PyTorch's op bindings release
// it before they dispatch.
using GilHeldHook = bool (*)();
void set_gil_held_hook(GilHeldHook hook);
bool thread_holds_gil();

// Raises (an exception the bindings turn into KeyboardInterrupt) when an interrupt is pending on
// this thread; otherwise returns at once.
using InterruptHook = void (*)();
void set_interrupt_hook(InterruptHook hook);
void check_interrupt();
// While one is alive on this thread, check_interrupt() does nothing: waits in the middle of work
// that must not stop halfway (a fused graph being enqueued) are not interrupted.
class NoInterrupt {
 public:
  NoInterrupt();
  ~NoInterrupt();
  NoInterrupt(const NoInterrupt&) = delete;
  NoInterrupt& operator=(const NoInterrupt&) = delete;
};
// Whether an exception raised by code torchtpu called (a kernel, a meta function, which may be
// Python) stops the program rather than reporting an error: a KeyboardInterrupt, a SystemExit.
// Such an exception is never taken for an argument error; it goes on up. (The bindings install
// the hook; without it, nothing is.)
using StopsProgramHook = bool (*)(std::exception_ptr error);
void set_stops_program_hook(StopsProgramHook hook);
bool stops_program(std::exception_ptr error);
// True once an interrupt was raised from a host wait (the exit handler then drops queued work
// instead of draining it).
bool interrupted_once();

// Locks `mutex` by the first rule: tries it, and if another thread has it, waits without the GIL.
template <typename Mutex>
std::unique_lock<Mutex> lock_without_gil(Mutex& mutex) {
  std::unique_lock<Mutex> lock(mutex, std::try_to_lock);
  if (!lock.owns_lock()) without_gil([&] { lock.lock(); });
  return lock;
}

// check_interrupt() with `lock` released; `lock` is held again on return, and when it raises.
template <typename Lock>
void check_interrupt_unlocked(Lock& lock) {
  lock.unlock();
  try {
    check_interrupt();
  } catch (...) {
    lock.lock();
    throw;
  }
  lock.lock();
}

// Waits on `cv` until `done()` by the second rule. `lock` is held on return.
template <typename Lock, typename Pred>
void wait_interruptibly(Lock& lock, std::condition_variable& cv, Pred done) {
  while (!done()) {
    if (cv.wait_for(lock, host_policy::kInterruptPoll, done)) return;
    check_interrupt_unlocked(lock);
  }
}

}  // namespace torchtpu::runtime
