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

/// OpenMP threads spin while they wait for work (libgomp's default, OMP_WAIT_POLICY
/// active). On a machine whose CPUs other processes keep busy, the spinning threads
/// fight them for the cores and a run becomes many times slower. Call first in
/// main(): when OMP_WAIT_POLICY is unset and other processes used at least half a
/// CPU during a 100 ms sample of /proc/stat, qfx runs itself again (execv of
/// /proc/self/exe with the same arguments) with OMP_WAIT_POLICY=passive, which
/// libgomp reads only at start-up, and, unless OMP_NUM_THREADS is set, with as many
/// threads as the others leave CPUs idle (at least 1), and says so on stderr. Ranks
/// of a multi-process run on one machine (LOCAL_WORLD_SIZE > 1) skip the check: their
/// siblings would count as the others. QFX_BUSY_CHECK=0 skips
/// the check. Returns normally when nothing is to be done.
void wait_passively_on_busy_machine(char** argv);

}  // namespace qfx::cli
