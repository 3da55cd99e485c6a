#pragma once
// Where torchtpu's host work runs: the one host-execution policy. The table of what runs where,
// and why, is docs/runtime.md, "Where host work runs"; every decision of it is made here, and
// the mechanisms that carry them out (StreamQueue's worker and drain in Stream.h, OpenMP teams
// in OpenMP.h, BlockPool in BlockPool.h) ask these functions rather than deciding themselves.
//
// The simulated device's work is host work: a kernel runs on some thread of this process. Three
// kinds of thread can run it:
//   - the issuing thread, the one that called the op (usually the program's main thread, which
//     keeps the process's lasting OpenMP team, OpenMP.h);
//   - a stream's worker, one thread per stream, started on first use (Stream.h);
//   - helpers of a parallel region: the issuing thread's OpenMP team, or BlockPool's threads where
//     torch's OpenMP runtime is not loaded (BlockPool.h).
// The policy keeps one OpenMP team busy on a 2-core machine instead of two teams competing for
// the same cores, and keeps every host wait interruptible within a bounded time.
#include <chrono>
#include <cstdint>

namespace torchtpu::runtime {

class StreamQueue;

// Budgets and spins of the policy (docs/runtime.md, "Where host work runs").
namespace host_policy {
// A stream's worker spins this long for new work before it parks: a host thread issuing small
// ops one after another then hands each over without a futex wake.
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
// Parked this long, a worker ends the OpenMP team it started (the next parallel loop starts a
// new one); a team kept through a step's short gaps costs nothing.
constexpr auto kWorkerTeamIdle = std::chrono::milliseconds(10);
// A host thread about to wait for a stream spins this long first (small work finishes in
// microseconds, and waking a parked waiter costs as much again).
constexpr auto kWaitSpin = std::chrono::microseconds(50);
// Under HostWaitsNext, parallel work runs on the issuing thread only this long after the
// outermost guard was made: later parallel work goes to the worker, so a Ctrl-C is taken
// within this time and one item's.
constexpr auto kHostWaitsParallelBudget = std::chrono::milliseconds(50);
// A synchronization runs the queued work itself (StreamQueue::drain) this long at most, then
// leaves the rest to the worker and waits interruptibly.
constexpr auto kDrainBudget = std::chrono::milliseconds(50);
// A host wait for device work wakes this often to take a pending Ctrl-C (HostWait.h).
constexpr auto kInterruptPoll = std::chrono::milliseconds(20);
// Work that runs parallel host loops ("parallel" work: it runs only where the process's OpenMP
// team is, see runs_on_issuing_thread): a VPU op, copy or fused region over this many elements
// (ATen's grain size, at::internal::GRAIN_SIZE), or a product of this many multiply-adds.
constexpr int64_t kParallelElements = 32768;
constexpr int64_t kParallelMacs = int64_t(1) << 18;
// A fused region's blocks run in parallel only from this many elements on (below, one thread).
constexpr int64_t kParallelBlocksMinNumel = int64_t(1) << 16;
}  // namespace host_policy

// The inline-work level: 1 (the default), work enqueued on an idle stream by the thread that
// keeps the process's OpenMP team runs at once on that thread, with the worker's semantics
// (ordering, errors kept for the next synchronization, host time counted); 0
// (TORCHTPU_INLINE=0), all work on the worker; 2 (TORCHTPU_INLINE=all), every thread runs work
// on an idle stream itself (for tests: it mixes both paths in one program). Read from the
// environment at first use.
void set_inline_work(int level);
int inline_work();

// Whether the process keeps one OpenMP team (TORCHTPU_ONE_OPENMP_TEAM, default 1, read once):
// threads other than the initial one end the team they started once idle.
bool one_openmp_team();
// True on the process's initial thread (its thread id is the process id).
bool on_initial_thread();
// True where device work may run with the process's lasting OpenMP team: on the initial thread,
// or on any thread when TORCHTPU_ONE_OPENMP_TEAM=0.
bool openmp_team_here();

// True on a thread running a stream's work (its worker, or a host thread running work with the
// worker's semantics): such work may not synchronize its own stream, and an allocation there
// that runs short of memory must not wait for the stream.
bool on_stream_worker();
// Marks this thread as running stream work while alive.
class StreamWorkScope {
 public:
  StreamWorkScope();
  ~StreamWorkScope();
  StreamWorkScope(const StreamWorkScope&) = delete;
  StreamWorkScope& operator=(const StreamWorkScope&) = delete;

 private:
  bool previous_;
};

// While one is alive on this thread, the work it enqueues goes to the worker: a fused graph or
// a compiled program is enqueued whole with no interrupt taken halfway, so run on this thread
// its host time could not be interrupted (and the host mostly waits for it next anyway).
class WorkerOnly {
 public:
  WorkerOnly();
  ~WorkerOnly();
  WorkerOnly(const WorkerOnly&) = delete;
  WorkerOnly& operator=(const WorkerOnly&) = delete;
};

// While one is alive on this thread (and the inline level is not 0), the work it enqueues on an
// idle stream runs at once on this thread: the host waits for the stream right after (a fused
// graph flushed by a synchronization or a read of its values), so handing it to the worker
// would only add a wake-up and a wait (docs/host-speed.md). Parallel work (a GEMM, a large
// region) runs here only within host_policy::kHostWaitsParallelBudget of the outermost guard.
// Work that does not run at once is kept for this thread's synchronization, which takes it over
// (StreamQueue::drain), until the outermost guard goes.
class HostWaitsNext {
 public:
  HostWaitsNext();
  ~HostWaitsNext();
  HostWaitsNext(const HostWaitsNext&) = delete;
  HostWaitsNext& operator=(const HostWaitsNext&) = delete;
  // Runs the work kept for this thread now (StreamQueue::drain), from the outermost guard, before
  // it goes: once the guard has ended, the worker takes the kept work at once, before this
  // thread's synchronization comes to drain it, and runs its parallel loops with a second OpenMP
  // team (docs/host-speed.md, "The hand-off at a synchronization").
  void run_kept_work();
};

// The decisions, asked by StreamQueue (Stream.cpp).
//
// Whether work enqueued now on an idle stream runs at once on this thread. `parallel`: the work
// runs parallel host loops (a GEMM, a pass over many elements), which run only where the
// process's OpenMP team is (on another thread their loops would start a team of their own).
bool runs_on_issuing_thread(bool parallel);
// Whether this thread runs a stream's queued work itself when it waits for it (drain), and keeps
// work for that under HostWaitsNext: the thread with the process's OpenMP team, unless work is
// sent to the worker (inline level 0, WorkerOnly) or this thread runs stream work.
bool issuing_thread_drains();
// Whether parallel work issued while the stream is busy runs on this thread after it ran the
// queue (drain): on the team's thread, outside HostWaitsNext.
bool runs_after_drain(bool parallel);
// Whether work that does not run at once is kept for this thread's next synchronization instead
// of being started by the worker (under HostWaitsNext on the team's thread): run on the worker,
// its loops would start a second team.
bool keeps_work_for_issuing_thread();

// The queues holding work kept for this thread (HostWaitsNext), in the order they were kept.
void keep_for_issuing_thread(StreamQueue* queue);
// Hands the work this thread kept on other queues than `except` to their workers (a
// synchronization of `except` first lets the others run: an item there may wait for an event of
// theirs).
void release_kept_work_except(const StreamQueue* except);

}  // namespace torchtpu::runtime
