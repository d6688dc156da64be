// The qfx commands' thread count: every CPU this process may use, shared among
// the local ranks (see threads.h).
#include "threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include <ATen/Parallel.h>

namespace qfx::cli {

int set_default_threads() {
  const char* user = std::getenv("OMP_NUM_THREADS");
  if (user && *user) return at::get_num_threads();
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int local = 1;
  if (const char* l = std::getenv("LOCAL_WORLD_SIZE")) local = std::max(1, std::atoi(l));
  at::set_num_threads(std::max(1, cpus / local));
  return at::get_num_threads();
}

}  // namespace qfx::cli
