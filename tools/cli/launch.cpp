// qfx ptq|qat --nproc N: spawns N ranks of this command (see launch.h).
#include "launch.h"
#include "signals.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < nproc; ++r) {
    const pid_t p = ::fork();
    if (p < 0) {
      std::perror("qfx: fork");
      for (pid_t q : pids) ::kill(q, SIGTERM);
      return 10;
    }
    if (p == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);  // the ranks share this machine's CPUs
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      if (r != 0) {  // the other ranks' stdout is rank 0's story told again
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) ::dup2(null, STDOUT_FILENO);
      }
      std::vector<char*> cargv;
      for (auto& a : args) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv("/proc/self/exe", cargv.data());
      std::perror("qfx: exec");
      ::_exit(127);
    }
    pids.push_back(p);
  }
  // Killing the launcher stops its ranks too (each cleans up after itself).
  on_interrupt([all = pids](int sig) {
    for (pid_t q : all) ::kill(q, sig);
    for (pid_t q : all) ::waitpid(q, nullptr, 0);
  });
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
