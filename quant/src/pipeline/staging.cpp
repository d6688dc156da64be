// Staging: the output folder of a pipeline, committed with one atomic rename where
// the file system allows it, file by file where it cannot.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "artifacts.h"
#include "qfx/quant/fault_injection.h"

namespace qfx::quant::pipeline {

namespace {

// Whether `real` (a canonical path) is a mount point: listed as one in
// /proc/self/mountinfo (bind mounts of a folder on the same device included), or
// on another device than its parent.
bool is_mount_point(const fs::path& real) {
  if (real == real.parent_path()) return true;
  struct stat self {}, parent {};
  if (::stat(real.c_str(), &self) != 0 || ::stat(real.parent_path().c_str(), &parent) != 0 || self.st_dev != parent.st_dev)
    return true;
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  while (std::getline(info, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT ...; spaces and the like are octal escapes (\040).
    std::istringstream fields(line);
    std::string id, parent_id, dev, root, point;
    if (!(fields >> id >> parent_id >> dev >> root >> point)) continue;
    std::string decoded;
    for (size_t i = 0; i < point.size(); ++i) {
      auto octal = [&](size_t k) { return k < point.size() && point[k] >= '0' && point[k] <= '7'; };
      if (point[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
        decoded += static_cast<char>((point[i + 1] - '0') * 64 + (point[i + 2] - '0') * 8 + (point[i + 3] - '0'));
        i += 3;
      } else {
        decoded += point[i];
      }
    }
    if (decoded == real.string()) return true;
  }
  return false;
}

// `dir` cannot be swapped by a rename: a mount point (a container volume's root:
// EBUSY; files cannot be renamed into it from outside: EXDEV), the file system's
// root, or the current folder or one above it (the user's shell would be left in
// the removed old folder).
bool needs_in_place(const fs::path& real, std::string* why) {
  if (is_mount_point(real)) {
    *why = "a mount point";
    return true;
  }
  std::error_code ec;
  const fs::path cwd = fs::canonical(fs::current_path(ec), ec);
  if (!ec) {
    auto r = real.begin(), c = cwd.begin();
    while (r != real.end() && c != cwd.end() && *r == *c) ++r, ++c;
    if (r == real.end()) {
      *why = "the current folder or one above it";
      return true;
    }
  }
  return false;
}

// A folder made and written here, on the same file system as `dir`.
bool usable_staging(const fs::path& staging, const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec)) return false;
  struct stat s {}, d {};
  const std::string probe = (staging / ".qfx_write_test").string();
  bool ok = ::stat(staging.c_str(), &s) == 0 && ::stat(dir.c_str(), &d) == 0 && s.st_dev == d.st_dev;
  if (ok) {
    std::ofstream f(probe);
    ok = static_cast<bool>(f);
  }
  fs::remove(probe, ec);
  if (!ok) fs::remove_all(staging, ec);
  return ok;
}

}  // namespace

Staging::Staging(const std::string& dir) : dir_(dir) {
  if (dir_.empty()) throw IoError("the output folder path is empty (set output.dir)");
  std::error_code ec;
  created_dir_ = !fs::exists(dir_, ec);
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_, ec))
    throw IoError(dir_ + ": output directory cannot be created or written" +
                  (ec ? " (" + ec.message() + ")" : std::string(" (a file is in the way)")));
  // A symbolic link to a folder stays the user's: the folder it points to is what
  // gets replaced, so the staging folder goes beside that one (same file system).
  real_ = fs::canonical(dir_, ec);
  if (ec) throw IoError(dir_ + ": cannot resolve the output folder: " + ec.message());
  std::string why;
  in_place_ = needs_in_place(real_, &why);
  if (!in_place_) {
    staging_ = real_.parent_path() / ("." + real_.filename().string() + ".qfx-staging-" + std::to_string(getpid()));
    if (!usable_staging(staging_, real_)) {
      in_place_ = true;  // its parent is read-only or another file system: stage inside
      why = "in a folder qfx cannot write beside";
    }
  }
  if (in_place_) {
    staging_ = real_ / (".qfx-staging-" + std::to_string(getpid()));
    if (!usable_staging(staging_, real_)) {
      if (created_dir_) fs::remove(dir_, ec);
      throw IoError(dir_ + ": output directory cannot be written");
    }
    in_place_reason_ = why;
  }
  cleanup_staging_ = Cleanup::add(staging_.string(), false);
  if (created_dir_) cleanup_dir_ = Cleanup::add(dir_, true);
}

Staging::~Staging() {
  Cleanup::forget(cleanup_staging_);
  Cleanup::forget(cleanup_dir_);
  std::error_code ec;
  if (committed_) return;
  fs::remove_all(staging_, ec);
  // A failed run leaves no trace: the folder it created (still empty) goes too.
  if (created_dir_ && fs::is_empty(dir_, ec)) fs::remove(dir_, ec);
}

void Staging::commit() {
  testing::fault_point(testing::FaultPoint::kBeforeCommit);
  std::error_code ec;
  if (!in_place_) {
    // Keep what the folder holds besides this run's files: hard links (no copy, no
    // risk to the originals), a copy where links are impossible. A symbolic link
    // stays a link (its target is not copied).
    constexpr auto kLink = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    for (const auto& e : fs::directory_iterator(real_, ec)) {
      const fs::path to = staging_ / e.path().filename();
      if (fs::exists(fs::symlink_status(to))) continue;  // this run writes a new version
      std::error_code lec;
      fs::copy(e.path(), to, kLink | fs::copy_options::create_hard_links, lec);
      if (lec) {
        fs::remove_all(to, lec);
        fs::copy(e.path(), to, kLink, lec);
      }
      if (lec) throw IoError(e.path().string() + ": cannot carry over into the new output folder: " + lec.message());
    }
    if (ec) throw IoError(dir_ + ": cannot list the output folder: " + ec.message());
    if (renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, real_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      fs::remove_all(staging_, ec);  // now the previous folder
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) throw IoError(dir_ + ": cannot swap in the new output folder: " + std::strerror(errno));
  }
  // No atomic exchange here: rename the files one by one (each file atomically).
  for (const auto& e : fs::directory_iterator(staging_)) {
    fs::rename(e.path(), real_ / e.path().filename(), ec);
    if (ec) throw IoError((fs::path(dir_) / e.path().filename()).string() + ": cannot rename into place: " + ec.message());
  }
  committed_ = true;
  fs::remove_all(staging_, ec);
}

}  // namespace qfx::quant::pipeline
