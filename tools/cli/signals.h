// What qfx does when it is interrupted (see signals.cpp).
#pragma once

#include <functional>

namespace qfx::cli {

/// SIGINT, SIGTERM and SIGHUP: a watcher thread removes what the run would leave
/// half-written (qfx::Cleanup: the staging folder, an output folder the run
/// created), then the process dies of the same signal (exit status 128 + signal).
/// Call once, early in main().
void install_signal_cleanup();

/// Also called (from the watcher thread, before the cleanup) with the signal: the
/// `--nproc` launcher forwards it to its ranks and waits for them, so none is left
/// running as an orphan.
void on_interrupt(std::function<void(int sig)> fn);

}  // namespace qfx::cli
