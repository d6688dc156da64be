// How many threads the qfx commands compute with (see threads.cpp).
#pragma once

namespace qfx::cli {

/// Sets libtorch's and OpenMP's thread count (the runtime's kernels and oneDNN use
/// OpenMP's) to the CPUs this process may run on (sched_getaffinity), divided by
/// the processes sharing them on this machine (LOCAL_WORLD_SIZE, which `--nproc`
/// sets for its ranks; 1 if unset), at least 1. Does nothing when OMP_NUM_THREADS
/// is set: the user's count stands. Without this, libtorch 1.13 starts OpenMP with
/// its own guess of the physical cores, which on some VMs is 1 whatever the CPUs.
/// Returns the thread count in effect.
int set_default_threads();

}  // namespace qfx::cli
