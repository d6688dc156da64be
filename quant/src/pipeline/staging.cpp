// Staging: the output folder of a pipeline, committed with one atomic rename.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "artifacts.h"

namespace qfx::quant::pipeline {

Staging::Staging(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  created_dir_ = !fs::exists(dir_, ec);
  fs::create_directories(dir_, ec);
  fs::path d = fs::absolute(fs::path(dir_), ec).lexically_normal();
  if (!d.has_filename()) d = d.parent_path();  // "out/" -> "out"
  staging_ = d.parent_path() / ("." + d.filename().string() + ".qfx-staging-" + std::to_string(getpid()));
  fs::remove_all(staging_, ec);
  const bool made = fs::create_directory(staging_, ec);
  const std::string probe = (staging_ / ".qfx_write_test").string();
  std::ofstream f(probe);
  if (!fs::is_directory(dir_) || !made || !f) {
    fs::remove_all(staging_, ec);
    throw IoError(dir_ + ": output directory cannot be created or written");
  }
  f.close();
  fs::remove(probe, ec);
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
  if (std::getenv("QFX_FAULT_BEFORE_COMMIT")) throw IoError(dir_ + ": fault injected before commit (QFX_FAULT_BEFORE_COMMIT)");
  std::error_code ec;
  // Keep what the folder holds besides this run's files: hard links (no copy, no
  // risk to the originals), a copy where links are impossible.
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const fs::path to = staging_ / e.path().filename();
    if (fs::exists(to)) continue;  // this run writes a new version
    std::error_code lec;
    fs::copy(e.path(), to, fs::copy_options::recursive | fs::copy_options::create_hard_links, lec);
    if (lec) fs::copy(e.path(), to, fs::copy_options::recursive, lec);
    if (lec) throw IoError(e.path().string() + ": cannot carry over into the new output folder: " + lec.message());
  }
  if (ec) throw IoError(dir_ + ": cannot list the output folder: " + ec.message());
  // A symbolic link to a folder stays the user's: its target receives the files.
  const bool link = fs::is_symlink(dir_, ec);
  if (!link && renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) == 0) {
    committed_ = true;
    fs::remove_all(staging_, ec);  // now the previous folder
    return;
  }
  if (!link && errno != EINVAL && errno != ENOSYS && errno != EXDEV)
    throw IoError(dir_ + ": cannot swap in the new output folder: " + std::strerror(errno));
  // No atomic exchange on this file system: rename the files one by one.
  for (const auto& e : fs::directory_iterator(staging_)) {
    fs::rename(e.path(), fs::path(dir_) / e.path().filename(), ec);
    if (ec) throw IoError((fs::path(dir_) / e.path().filename()).string() + ": cannot rename into place: " + ec.message());
  }
  committed_ = true;
  fs::remove_all(staging_, ec);
}

}  // namespace qfx::quant::pipeline
