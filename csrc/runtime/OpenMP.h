#pragma once
// One OpenMP team per process while torchtpu is idle (docs/runtime.md, "One OpenMP team").
//
// The OpenMP runtime torch loads (GCC's libgomp) keeps a team of threads for each thread that
// opened a parallel region, for as long as that thread lives. While the process has more of
// those threads than cores, libgomp throttles every team: a thread waiting for work spins about
// 100 rounds instead of about 300000 before it sleeps, so each later parallel loop, in any team,
// first wakes its threads with a futex. A PyTorch CPU training step of a small transformer took
// 15.1 ms instead of 8.6 ms while another thread kept an idle team (docs/host-speed.md).
//
// So the threads torchtpu runs device work on besides the process's initial thread (a stream's
// worker, the autograd engine's thread for "tpu") end the team they started once they are idle:
// the worker after host_policy::kWorkerTeamIdle with nothing to run, any other thread when its
// torchtpu kernel returns. Every thread keeps ATen's intra-op thread count, so a kernel's result
// does not depend on the thread that ran it (a reduction over two threads adds in another order
// than over one). The initial thread, which runs the user's own CPU work, keeps its team; its
// device work runs there at once when the stream is idle, and when it waits for a stream it runs
// the queued work itself (HostPolicy.h). TORCHTPU_ONE_OPENMP_TEAM=0 keeps every thread's team
// for good.
//
// The runtime is built without OpenMP; the OpenMP functions are bound weakly to the runtime
// torch loads, and without one everything here does nothing.

extern "C" {
void omp_set_num_threads(int) __attribute__((weak));
int omp_get_max_threads() __attribute__((weak));
// GCC's OpenMP entry for a parallel region (what `#pragma omp parallel` compiles to; its ABI has
// not changed since GCC 4.9): fn(data) on the calling thread and num_threads - 1 of its team.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags)
    __attribute__((weak));
int omp_in_parallel() __attribute__((weak));
int omp_pause_resource_all(int kind) __attribute__((weak));  // (OpenMP 5.0; kind 1: soft)
}

#include "runtime/HostPolicy.h"

namespace torchtpu::runtime {

// Whether a thread keeps its team (one_openmp_team, openmp_team_here) is the host-execution
// policy's decision (HostPolicy.h).

// Ends the OpenMP team the calling thread started, if it has one and !openmp_team_here() (its
// next parallel region starts a new one). Not inside a parallel region. The outermost
// aten::KernelScope calls it as a torchtpu kernel returns.
void release_openmp_team();

// While one is alive, OpenMP regions opened on this thread run on this thread alone.
class SerialOpenMP {
 public:
  SerialOpenMP();
  ~SerialOpenMP();
  SerialOpenMP(const SerialOpenMP&) = delete;
  SerialOpenMP& operator=(const SerialOpenMP&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace torchtpu::runtime
