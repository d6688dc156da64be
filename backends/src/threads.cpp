// The runtime's thread count (see threads.h): OpenMP's pool.
#include "qfx/runtime/threads.h"

#include <omp.h>

#include <stdexcept>
#include <string>
#include "qfx/error.h"

namespace qfx::runtime {

void set_num_threads(int n) {
  if (n < 1) throw ArgumentError("set_num_threads: " + std::to_string(n) + " threads; give 1 or more");
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace qfx::runtime
