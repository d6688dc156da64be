// qfx ptq|qat --nproc N: local data-parallel processes (see launch.cpp).
#pragma once

namespace qfx::cli {

/// Runs this same command line (without --nproc) as `nproc` processes with
/// torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE = nproc,
/// MASTER_ADDR=127.0.0.1, MASTER_PORT: a free port), rank 0's output on this terminal and the other
/// ranks' errors on stderr. Waits for all; when one fails, the others get the
/// collective timeout (QFX_DIST_TIMEOUT, default 300 s) plus 10 s to stop on
/// their own and are then terminated. Returns 0 if every rank succeeded, else the
/// first failed rank's exit code (10 for a rank killed by a signal, named on stderr).
int launch_local(int nproc, int argc, char** argv);

}  // namespace qfx::cli
