// Error messages as the qfx commands print them (no libtorch: the runtime-only build uses it too).
#pragma once

#include <filesystem>
#include <iostream>
#include <new>
#include <string>

#include "qfx/error.h"

namespace qfx::cli {

/// An error message cut to one readable line: a message that quotes a huge value
/// keeps its first 4000 characters and says how many more there were.
inline std::string clip_message(const std::string& m) {
  constexpr size_t kMax = 4000;
  if (m.size() <= kMax) return m;
  return m.substr(0, kMax) + "... (" + std::to_string(m.size() - kMax) + " more characters)";
}

/// A std::filesystem error as a user reads it: the paths first, then the reason.
inline std::string filesystem_message(const std::filesystem::filesystem_error& e) {
  std::string m;
  if (!e.path1().empty()) m += e.path1().string();
  if (!e.path2().empty()) m += " -> " + e.path2().string();
  return (m.empty() ? "" : m + ": ") + e.code().message();
}

/// Called from inside a catch block of command `cmd`: prints the exception in flight
/// as the qfx commands do and returns its exit code (qfx::Error's own; IoError's for a
/// path the OS refused; DataError's for out of memory, with `oom_hint`; 1 for anything
/// else, reported as an internal error).
inline int report_exception(const std::string& cmd, const std::string& oom_hint) {
  try {
    throw;
  } catch (const InternalError& e) {  // a broken invariant: a bug
    std::cerr << "qfx " << cmd << ": internal error (please report it with the command line): " << e.what() << "\n";
    return e.exit_code();
  } catch (const Error& e) {
    std::cerr << "qfx: error: " << clip_message(e.what()) << "\n";
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {  // a path the OS refused (too long, permissions, ...)
    std::cerr << "qfx: error: " << clip_message(filesystem_message(e)) << "\n";
    return IoError("").exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << "qfx: error: out of memory (" << oom_hint << ")\n";
    return DataError("").exit_code();
  } catch (const std::exception& e) {  // a bug: say which command hit it
    std::cerr << "qfx " << cmd << ": internal error (please report it with the command line): " << e.what() << "\n";
    return 1;
  }
}

}  // namespace qfx::cli
