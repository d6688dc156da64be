// Shared by the libFuzzer targets: the fuzz input written to a private file (the
// readers under test take paths, as users give them), and the one rule every
// target checks: bad input ends in a qfx::Error, never in a crash, a sanitizer
// report or any other exception.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

namespace qfx::fuzz {

/// Writes `size` bytes to a file named `name` in this process's scratch folder
/// (/dev/shm when present; `name` may hold subfolders) and returns its path. The file is rewritten each call.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string dir = [] {
    const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string d = base + "/qfx_fuzz_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  const std::string path = dir + "/" + name;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

/// With QFX_FUZZ_VERBOSE set, prints the error an input ended in (to see what a seed
/// or a finding reaches: `QFX_FUZZ_VERBOSE=1 fuzz_pt2 tests/fuzz/corpus/pt2/act_net.bin`).
inline void verbose(const std::exception& e) {
  if (std::getenv("QFX_FUZZ_VERBOSE")) std::fprintf(stderr, "qfx error: %s\n", e.what());
}

}  // namespace qfx::fuzz
