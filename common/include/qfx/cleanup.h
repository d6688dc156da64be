#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <system_error>

namespace qfx {

/// Paths a run would leave half-written if the process were stopped now: a
/// pipeline's staging folder (removed whole) and an output folder the run created
/// (removed only while empty). The CLI's SIGINT / SIGTERM handling
/// (`run_cleanup`, from a watcher thread, never from the signal handler itself)
/// removes them before the process dies of the signal. A SIGKILL cannot be caught:
/// it leaves the staging folder (`.NAME.qfx-staging-PID` beside the output
/// folder), which the next run into that folder replaces; the output folder itself
/// is never half-written (it is swapped in whole).
class Cleanup {
 public:
  /// Registers `path`; `only_if_empty`: remove it only if it is an empty folder.
  /// Returns the id to pass to `forget`.
  static int add(const std::string& path, bool only_if_empty) {
    std::lock_guard<std::mutex> lk(mutex());
    const int id = ++next_id();
    entries()[id] = {path, only_if_empty};
    return id;
  }
  /// Unregisters `id` (the run committed or removed the path itself).
  static void forget(int id) {
    std::lock_guard<std::mutex> lk(mutex());
    entries().erase(id);
  }
  /// Removes every registered path (newest first) and forgets them.
  static void run() {
    std::lock_guard<std::mutex> lk(mutex());
    for (auto it = entries().rbegin(); it != entries().rend(); ++it) {
      std::error_code ec;
      if (!it->second.only_if_empty) std::filesystem::remove_all(it->second.path, ec);
      else if (std::filesystem::is_empty(it->second.path, ec)) std::filesystem::remove(it->second.path, ec);
    }
    entries().clear();
  }

 private:
  struct Entry {
    std::string path;
    bool only_if_empty;
  };
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<int, Entry>& entries() {
    static std::map<int, Entry> e;
    return e;
  }
  static int& next_id() {
    static int n = 0;
    return n;
  }
};

}  // namespace qfx
