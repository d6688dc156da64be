// qfx ptq|qat --nproc N: spawns N ranks of this command (see launch.h).
#include "launch.h"
#include "signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qfx::cli {
namespace {

// A port the kernel says is free now (bound to port 0, then released).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 29500;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

// The ranks started so far, shared with the signal watcher thread: a signal that
// arrives while ranks are being started reaches every rank started before it, and
// no rank starts after it.
struct Ranks {
  std::mutex mu;
  std::vector<pid_t> pids;
  bool stopping = false;
};

// The environment of rank `r`: this process's, with torchrun's variables set.
std::vector<std::string> rank_env(int r, int nproc, const std::string& port) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(r)},          {"LOCAL_RANK", std::to_string(r)},
      {"WORLD_SIZE", std::to_string(nproc)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},  // the ranks share this machine's CPUs
      {"MASTER_ADDR", "127.0.0.1"},          {"MASTER_PORT", port}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const auto& s : set) replaced = replaced || kv.rfind(s.first + "=", 0) == 0;
    if (!replaced) env.push_back(kv);
  }
  for (const auto& s : set) env.push_back(s.first + "=" + s.second);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child between fork and exec (async-signal-safe calls only): dies with the
// launcher (SIGTERM when it exits for any reason, SIGKILL included), default signal
// handling, rank 0's stdout only; then this same program as rank `r`.
[[noreturn]] void exec_rank(int r, pid_t launcher, char** argv, char** envp) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(128 + SIGTERM);  // the launcher died before prctl
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (r != 0) {  // the other ranks' stdout is rank 0's story told again
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDOUT_FILENO);
  }
  ::execve("/proc/self/exe", argv, envp);
  static const char msg[] = "qfx: error: cannot start a rank (exec /proc/self/exe failed)\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(127);
}

// Sends `sig` to every rank started and waits for them (ECHILD: already reaped).
void stop_ranks(Ranks& ranks, int sig) {
  std::vector<pid_t> all;
  {
    std::lock_guard<std::mutex> lk(ranks.mu);
    ranks.stopping = true;
    all = ranks.pids;
  }
  for (pid_t q : all) ::kill(q, sig);
  for (pid_t q : all) ::waitpid(q, nullptr, 0);
}

// Starts the ranks, each with its environment built before the fork (a child of a
// threaded process may only make async-signal-safe calls). The signals are blocked
// in this thread around each fork, so the child cannot run the launcher's handler.
// False if a fork failed; a signal during the launch stops it (the watcher thread
// stops the ranks started and ends the process with the signal).
bool start_ranks(Ranks& ranks, int nproc, std::vector<std::string>& args, const std::string& port) {
  std::vector<char*> cargv = c_strings(args);
  sigset_t block, old;
  sigemptyset(&block);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, s);
  const pid_t launcher = ::getpid();
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> env = rank_env(r, nproc, port);
    std::vector<char*> cenv = c_strings(env);
    std::unique_lock<std::mutex> lk(ranks.mu);
    if (ranks.stopping) {
      lk.unlock();
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the watcher ends the process
    }
    ::pthread_sigmask(SIG_BLOCK, &block, &old);
    const pid_t p = ::fork();
    if (p == 0) exec_rank(r, launcher, cargv.data(), cenv.data());
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (p < 0) {
      std::perror("qfx: fork");
      return false;
    }
    ranks.pids.push_back(p);
  }
  return true;
}

}  // namespace

int launch_local(int nproc, int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    args.push_back(a);
  }
  const std::string port = std::to_string(free_port());
  int timeout_s = 300;
  if (const char* t = std::getenv("QFX_DIST_TIMEOUT")) timeout_s = std::max(1, std::atoi(t));
  std::fflush(stdout);
  std::fflush(stderr);
  // Killing the launcher stops its ranks too (each cleans up after itself); set
  // before the first rank starts, so no signal finds a rank it does not know.
  auto ranks = std::make_shared<Ranks>();
  on_interrupt([ranks](int sig) { stop_ranks(*ranks, sig); });
  if (!start_ranks(*ranks, nproc, args, port)) {
    stop_ranks(*ranks, SIGTERM);
    return 10;
  }
  std::vector<pid_t> pids = ranks->pids;
  int code = 0, left = nproc;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (left > 0) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "qfx: error: ranks still running %d s after a rank failed: terminating them\n", timeout_s + 10);
        for (pid_t q : pids)
          if (q > 0) ::kill(q, SIGKILL);
        deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (p < 0) break;
    --left;
    int r = 0;
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] == p) r = static_cast<int>(i), pids[i] = -1;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 10;
    if (WIFSIGNALED(st)) std::fprintf(stderr, "qfx: error: rank %d was killed by signal %d (%s)\n", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
    if (rc != 0 && code == 0) {
      code = rc;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s + 10);
    }
  }
  return code;
}

}  // namespace qfx::cli
