// ONNX external data (onnx.ai "External Data"): reading a tensor's bytes from the
// file beside the model, for both ONNX readers (the fx graph and the runtime).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "qfx/error.h"

namespace qfx::onnx_external {

namespace fs = std::filesystem;


/// A non-negative decimal external-data entry (`key` offset or length, value `v`) as a
/// byte count; IoError naming `what` and the entry otherwise.
inline uint64_t external_number(const std::string& key, const std::string& v, const std::string& what) {
  uint64_t x = 0;
  bool ok = !v.empty() && v.size() <= 19;
  for (char c : v) ok = ok && c >= '0' && c <= '9';
  if (ok) x = std::stoull(v);
  if (!ok) throw IoError(what + ": external data " + key + " '" + v.substr(0, 40) + "' is not a byte count");
  return x;
}

/// The external-data file `location` names: a regular file inside the model's folder
/// `dir`, symbolic links resolved; returns its canonical path. Refused (IoError naming
/// `what`) before it is opened for reading: a FIFO, a device or a socket (opening one
/// blocks or never ends), a folder (reading one gives nothing), or a path that leads
/// out of the folder.
inline std::string external_file(const std::string& location, const std::string& dir, const std::string& what) {
  if (location.empty()) throw IoError(what + ": external data without a location");
  if (location[0] == '/' || location.find("..") != std::string::npos)
    throw IoError(what + ": external data location '" + location + "' is not a file inside the model's folder");
  const std::string file = dir + "/" + location;
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) throw IoError(what + ": cannot open its external data file " + file + " (" + ec.message() + ")");
  const fs::path root = fs::canonical(dir, ec);
  const std::string r = root.string(), f = real.string();
  if (ec || f.size() <= r.size() || f.compare(0, r.size(), r) != 0 || (r != "/" && f[r.size()] != '/'))
    throw IoError(what + ": external data location '" + location + "' leads to " + f + ", outside the model's folder");
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw IoError(what + ": external data location '" + location + "' is not a regular file (" +
                  (S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device, socket or other file") + ")");
  return f;
}

/// The bytes of an ONNX tensor stored as external data (onnx.ai "External Data"):
/// `TensorProto`'s `external_data` entries (`location` relative to the model's
/// folder `dir`, `offset` and `length` in bytes) read from that file, exactly
/// `nbytes` of them. `TensorProto` is onnx::TensorProto (a template so that this
/// header needs no ONNX headers). Throws IoError naming `what` (the model file and
/// tensor) for a location outside the folder or not a regular file, a length that
/// is not `nbytes`, a file too short, or a failed read.
template <typename TensorProto>
std::string external_bytes(const TensorProto& tp, const std::string& what, const std::string& dir, uint64_t nbytes) {
  std::string location;
  uint64_t offset = 0, length = nbytes;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = external_number("offset", kv.value(), what);
    else if (kv.key() == "length") length = external_number("length", kv.value(), what);
  }
  const std::string file = external_file(location, dir, what);
  if (length != nbytes)
    throw IoError(what + ": external data length " + std::to_string(length) + " bytes, the dims need " + std::to_string(nbytes));
  // O_NONBLOCK: should the file have become a FIFO since the check, open returns at once
  // and fstat refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw IoError(what + ": cannot open its external data file " + file + " (" + std::strerror(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw IoError(what + ": external data file " + file + " is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size || size - offset < nbytes)
    throw IoError(what + ": external data file " + file + " holds " + std::to_string(size) + " bytes; the tensor's " +
                  std::to_string(nbytes) + " bytes at offset " + std::to_string(offset) + " lie past its end");
  std::string bytes(nbytes, '\0');
  uint64_t got = 0;
  while (got < nbytes) {
    const ssize_t n = ::pread(fd, bytes.data() + got, nbytes - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw IoError(what + ": external data file " + file + ": read " + std::to_string(got) + " of the tensor's " +
                    std::to_string(nbytes) + " bytes" + (n < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
    got += static_cast<uint64_t>(n);
  }
  return bytes;
}

}  // namespace qfx::onnx_external
