#include "runtime/OpenMP.h"

#include "runtime/Env.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace torchtpu::runtime {

namespace {
bool read_one_openmp_team() {
  const std::string v = env::value("TORCHTPU_ONE_OPENMP_TEAM");
  TORCH_CHECK(v == "0" || v == "1", "TORCHTPU_ONE_OPENMP_TEAM='", v, "': expected 0 or 1");
  return v == "1";
}
}  // namespace

bool one_openmp_team() {
  static const bool on = read_one_openmp_team();
  return on;
}

bool on_initial_thread() {
  thread_local const bool initial = static_cast<pid_t>(syscall(SYS_gettid)) == getpid();
  return initial;
}

bool openmp_team_here() { return !one_openmp_team() || on_initial_thread(); }

void release_openmp_team() {
  if (openmp_team_here() || omp_pause_resource_all == nullptr) return;
  if (omp_in_parallel != nullptr && omp_in_parallel()) return;
  // (Soft pause: the threads of this thread's team end; without a team it returns at once.)
  omp_pause_resource_all(1);
}

SerialOpenMP::SerialOpenMP() {
  if (omp_set_num_threads != nullptr && omp_get_max_threads != nullptr) {
    previous_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
}

SerialOpenMP::~SerialOpenMP() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

}  // namespace torchtpu::runtime
