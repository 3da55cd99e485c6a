#include "runtime/HostPolicy.h"

#include "runtime/Env.h"
#include "runtime/Stream.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

namespace torchtpu::runtime {

namespace {
int inline_level_from_env() {
  const std::string v = env::value("TORCHTPU_INLINE");
  if (v == "0") return 0;
  if (v == "all") return 2;
  TORCH_CHECK(v == "1", "TORCHTPU_INLINE='", v, "': expected 0, 1 or all");
  return 1;
}
// The level, read from the environment at first use (-1 until then): at load time a bad value
// could only abort the process, and a test's main() sets its own before anything runs.
std::atomic<int> g_inline{-1};

bool read_one_openmp_team() {
  const std::string v = env::value("TORCHTPU_ONE_OPENMP_TEAM");
  TORCH_CHECK(v == "0" || v == "1", "TORCHTPU_ONE_OPENMP_TEAM='", v, "': expected 0 or 1");
  return v == "1";
}

thread_local bool t_stream_work = false;  // this thread runs a stream's work (StreamWorkScope)
thread_local int t_worker_only = 0;       // WorkerOnly guards alive on this thread
thread_local int t_host_waits_next = 0;   // HostWaitsNext guards alive on this thread
// When the outermost HostWaitsNext on this thread was made.
thread_local std::chrono::steady_clock::time_point t_host_waits_since;
thread_local std::vector<StreamQueue*> t_kept;  // queues holding work for this thread
}  // namespace

void set_inline_work(int level) {
  TORCH_CHECK(level >= 0 && level <= 2, "inline work level ", level, ": expected 0, 1 or 2");
  g_inline.store(level, std::memory_order_relaxed);
}

int inline_work() {
  int level = g_inline.load(std::memory_order_relaxed);
  if (level < 0) {
    level = inline_level_from_env();
    int unset = -1;
    if (!g_inline.compare_exchange_strong(unset, level, std::memory_order_relaxed)) level = unset;
  }
  return level;
}

bool one_openmp_team() {
  static const bool on = read_one_openmp_team();
  return on;
}

bool on_initial_thread() {
  thread_local const bool initial = static_cast<pid_t>(syscall(SYS_gettid)) == getpid();
  return initial;
}

bool openmp_team_here() { return !one_openmp_team() || on_initial_thread(); }

bool on_stream_worker() { return t_stream_work; }
StreamWorkScope::StreamWorkScope() : previous_(t_stream_work) { t_stream_work = true; }
StreamWorkScope::~StreamWorkScope() { t_stream_work = previous_; }

WorkerOnly::WorkerOnly() { ++t_worker_only; }
WorkerOnly::~WorkerOnly() { --t_worker_only; }

HostWaitsNext::HostWaitsNext() {
  if (t_host_waits_next++ == 0) t_host_waits_since = std::chrono::steady_clock::now();
}

HostWaitsNext::~HostWaitsNext() {
  if (--t_host_waits_next > 0) return;
  // The work kept for this thread goes to the workers again (this thread's synchronization,
  // which follows, takes it over first when it comes in time).
  std::vector<StreamQueue*> kept;
  kept.swap(t_kept);
  for (StreamQueue* q : kept) q->release_hold();
}

void HostWaitsNext::run_kept_work() {
  if (t_host_waits_next != 1 || t_kept.empty()) return;
  // (drain hands the other streams' kept work to their workers first, as a synchronization does)
  const std::vector<StreamQueue*> kept = t_kept;
  for (StreamQueue* q : kept) q->drain();
}

bool runs_on_issuing_thread(bool parallel) {
  const int level = inline_work();
  // Under HostWaitsNext, parallel work runs here only within the budget: past it, a graph's
  // long work goes to the worker, and the wait that follows stays interruptible. Parallel work
  // runs here only on the thread that keeps the process's OpenMP team: on another thread its
  // loops would start a team of their own. Otherwise, on the thread with the team, all work on
  // an idle stream runs here: a worker running beside the team and the host thread would be a
  // third thread on the cores the team spans, and its own loops would start a second team.
  const bool here =
      t_host_waits_next > 0
          ? level >= 1 &&
                (!parallel || (openmp_team_here() &&
                               std::chrono::steady_clock::now() - t_host_waits_since <
                                   host_policy::kHostWaitsParallelBudget))
          : level == 2 || (level == 1 && openmp_team_here());
  return here && t_worker_only == 0 && !t_stream_work;
}

bool issuing_thread_drains() {
  return one_openmp_team() && on_initial_thread() && !t_stream_work && t_worker_only == 0 &&
         inline_work() >= 1;
}

bool runs_after_drain(bool parallel) {
  return parallel && t_host_waits_next == 0 && issuing_thread_drains();
}

bool keeps_work_for_issuing_thread() { return t_host_waits_next > 0 && issuing_thread_drains(); }

void keep_for_issuing_thread(StreamQueue* queue) { t_kept.push_back(queue); }

void release_kept_work_except(const StreamQueue* except) {
  for (auto it = t_kept.begin(); it != t_kept.end();) {
    if (*it == except) {
      ++it;
      continue;
    }
    (*it)->release_hold();
    it = t_kept.erase(it);
  }
}

}  // namespace torchtpu::runtime
