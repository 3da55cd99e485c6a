#include "runtime/OpenMP.h"

namespace torchtpu::runtime {

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
