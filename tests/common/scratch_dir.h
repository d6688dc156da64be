// Test helper: a private temporary directory per test, so tests that write files
// can run in parallel (`ctest -j`) without sharing a path.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace qfx::test {

/// A new directory under the system temporary directory, named after the running
/// test ("qfx_<Suite>_<Test>_XXXXXX"), removed with its contents when destroyed.
/// Throws std::runtime_error if the directory cannot be made.
class ScratchDir {
 public:
  ScratchDir() {
    std::string name = "qfx";
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      name += std::string("_") + info->test_suite_name() + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    std::string templ = (std::filesystem::temp_directory_path() / (name + "_XXXXXX")).string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("cannot create a scratch directory from " + templ);
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// `path() / name` as a string.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// This test process's scratch directory (made on first use, removed at exit):
/// for helpers that write files outside a test body. Unique per process, so
/// tests run by `ctest -j` (one process each) never share it.
inline const ScratchDir& process_scratch() {
  static ScratchDir dir;
  return dir;
}

/// `process_scratch()` as a string, for building paths.
inline std::string scratch_path() { return process_scratch().path().string(); }

}  // namespace qfx::test
