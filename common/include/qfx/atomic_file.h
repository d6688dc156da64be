// Writers that never leave a half-written file: write to a temporary name beside
// the target, then rename it into place (POSIX rename is atomic within a file
// system); the temporary is removed if anything fails.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>

#include "qfx/error.h"

namespace qfx {

/// The temporary name `write_atomic` writes before renaming: `path` + ".tmp".
inline std::string temp_path_for(const std::string& path) { return path + ".tmp"; }

/// Calls `write(tmp)` to produce the file at the temporary name, then renames it
/// to `path`. If `write` throws or the rename fails the temporary is removed and
/// `path` is untouched; a qfx::Error from `write` is rethrown as is, anything
/// else becomes an IoError naming `path`.
inline void write_atomic(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temp_path_for(path);
  std::error_code ec;
  try {
    write(tmp);
  } catch (const Error&) {
    std::filesystem::remove(tmp, ec);
    throw;
  } catch (const std::exception& e) {
    std::filesystem::remove(tmp, ec);
    throw IoError(path + ": cannot write (" + std::string(e.what()).substr(0, 200) + ")");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw IoError(path + ": cannot rename the temporary file into place: " + ec.message());
  }
}

/// Writes `bytes` to `path` atomically (see write_atomic). Throws IoError naming
/// `path` if its directory is missing or not writable, or the disk is full.
inline void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_atomic(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw IoError(path + ": cannot write (directory missing or not writable)");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) throw IoError(path + ": write failed (disk full?)");
  });
}

}  // namespace qfx
