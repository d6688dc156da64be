// The qfx commands' thread count: every CPU this process may use, shared among
// the local ranks (see threads.h).
#include "threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

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

namespace {

// The machine's total and busy CPU time (clock ticks) from /proc/stat's "cpu" line:
// busy is everything but idle and iowait. False if unreadable.
bool cpu_ticks(unsigned long long* total, unsigned long long* busy) {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return false;
  std::istringstream ss(line.substr(4));
  unsigned long long v = 0, sum = 0, idle = 0;
  for (int i = 0; ss >> v; ++i) {
    if (i >= 8) break;  // guest times are already counted in user and nice
    sum += v;
    if (i == 3 || i == 4) idle += v;  // idle, iowait
  }
  *total = sum;
  *busy = sum - idle;
  return sum > 0;
}

}  // namespace

void wait_passively_on_busy_machine(char** argv) {
  if (const char* note = std::getenv("QFX_BUSY_NOTE")) {  // the run after the re-exec
    if (*note) std::cerr << "qfx: " << note << "\n";
    unsetenv("QFX_BUSY_NOTE");
    return;
  }
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* check = std::getenv("QFX_BUSY_CHECK");
  if ((policy && *policy) || (check && std::string(check) == "0")) return;
  // A rank of several on this machine (--nproc, torchrun): its siblings are the load
  // it would measure, and set_default_threads already shares the CPUs among them.
  if (const char* local = std::getenv("LOCAL_WORLD_SIZE"); local && std::atoi(local) > 1) return;
  unsigned long long t0 = 0, b0 = 0, t1 = 0, b1 = 0;
  if (!cpu_ticks(&t0, &b0)) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // this process sleeps: the busy time is others'
  if (!cpu_ticks(&t1, &b1) || t1 <= t0) return;
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const double busy = static_cast<double>(b1 - b0) / static_cast<double>(t1 - t0) * static_cast<double>(cpus);
  if (busy < 0.5) return;
  // The CPUs the others leave idle (at least 1), unless the user chose a count.
  const char* user_threads = std::getenv("OMP_NUM_THREADS");
  const long free_cpus = std::max(1L, cpus - std::lround(busy));
  const bool set_threads = !(user_threads && *user_threads);
  char note[320];
  std::snprintf(note, sizeof note,
                "other processes keep %.1f of %ld CPUs busy: OpenMP threads wait passively%s (OMP_WAIT_POLICY=passive%s; "
                "set OMP_WAIT_POLICY and OMP_NUM_THREADS to choose)",
                busy, cpus, set_threads ? (", on the " + std::to_string(free_cpus) + " idle CPU(s)").c_str() : "",
                set_threads ? (", OMP_NUM_THREADS=" + std::to_string(free_cpus)).c_str() : "");
  if (set_threads) setenv("OMP_NUM_THREADS", std::to_string(free_cpus).c_str(), 1);
  setenv("OMP_WAIT_POLICY", "passive", 1);
  // Said only when it changes the thread count (the wait policy alone changes no result).
  setenv("QFX_BUSY_NOTE", set_threads && free_cpus < cpus ? note : "", 1);
  execv("/proc/self/exe", argv);
  unsetenv("QFX_BUSY_NOTE");  // exec failed: carry on as we are (the policy no longer applies)
  unsetenv("OMP_WAIT_POLICY");
  if (set_threads) unsetenv("OMP_NUM_THREADS");
}

}  // namespace qfx::cli
