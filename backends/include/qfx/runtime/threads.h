// The runtime's thread count.
#pragma once

namespace qfx::runtime {

/// Sets how many threads the runtime's kernels, observer taps and oneDNN use from
/// now on, in the calling thread and the threads it starts (OpenMP's
/// `omp_set_num_threads`; in a program that links libtorch too this is the same
/// pool `at::set_num_threads` sizes). The default is OpenMP's: `OMP_NUM_THREADS`,
/// else every CPU. On a machine shared with other busy processes, fewer threads
/// and `OMP_WAIT_POLICY=passive` (set before the program starts) avoid threads
/// spinning against each other. Throws ArgumentError for `n` < 1.
void set_num_threads(int n);

/// The number of threads a parallel region of the runtime uses now
/// (`omp_get_max_threads`).
int num_threads();

}  // namespace qfx::runtime
