// Interrupted runs leave nothing half-written (see signals.h). The handler only
// writes the signal number to a pipe (async-signal-safe); a thread does the rest.
#include "signals.h"

#include <signal.h>
#include <unistd.h>

#include <mutex>
#include <thread>

#include "qfx/cleanup.h"

namespace qfx::cli {
namespace {

int g_pipe[2] = {-1, -1};
std::mutex g_mutex;
std::function<void(int)> g_hook;

extern "C" void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = write(g_pipe[1], &b, 1);
}

}  // namespace

void install_signal_cleanup() {
  if (pipe(g_pipe) != 0) return;  // no pipe: default handling (the staging folder may stay)
  std::thread([] {
    unsigned char sig = 0;
    while (read(g_pipe[0], &sig, 1) != 1) {
    }
    std::function<void(int)> hook;
    {
      std::lock_guard<std::mutex> lk(g_mutex);
      hook = g_hook;
    }
    if (hook) hook(sig);
    Cleanup::run();
    signal(sig, SIG_DFL);
    raise(sig);
  }).detach();
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
}

void on_interrupt(std::function<void(int sig)> fn) {
  std::lock_guard<std::mutex> lk(g_mutex);
  g_hook = std::move(fn);
}

}  // namespace qfx::cli
