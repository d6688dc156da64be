// The unpacked size of a zip archive from its central directory (PKWARE APPNOTE 6.3).
#include "archive_size.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <vector>

#include "qfx/error.h"

namespace qfx::fx::detail {

namespace {

uint64_t le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::vector<unsigned char> read_at(std::ifstream& f, uint64_t at, uint64_t n, const std::string& path) {
  std::vector<unsigned char> b(static_cast<size_t>(n));
  f.clear();
  f.seekg(static_cast<std::streamoff>(at));
  f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(f.gcount()) != n) throw IoError(path + ": truncated zip archive (its directory points past the end)");
  return b;
}

}  // namespace

uint64_t zip_unpacked_size(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw IoError(path + ": cannot open");
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  // The end of central directory record: 22 bytes plus a comment of up to 65535.
  const uint64_t tail = std::min<uint64_t>(size, 22 + 65535);
  const auto t = read_at(f, size - tail, tail, path);
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0 && eocd < 0; --i)
    if (le(&t[static_cast<size_t>(i)], 4) == 0x06054b50) eocd = i;
  if (eocd < 0) throw IoError(path + ": not a zip archive (no end of central directory record; truncated?)");
  const unsigned char* e = &t[static_cast<size_t>(eocd)];
  uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_off = le(e + 16, 4);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {
    // ZIP64: the locator (20 bytes) precedes the record and points at the ZIP64 end record.
    const uint64_t at = size - tail + static_cast<uint64_t>(eocd);
    if (at < 20) throw IoError(path + ": corrupt zip archive (ZIP64 locator missing)");
    const auto loc = read_at(f, at - 20, 20, path);
    if (le(loc.data(), 4) != 0x07064b50) throw IoError(path + ": corrupt zip archive (ZIP64 locator missing)");
    const uint64_t rec = le(loc.data() + 8, 8);
    if (rec + 56 > size) throw IoError(path + ": corrupt zip archive (ZIP64 record past the end)");
    const auto z = read_at(f, rec, 56, path);
    if (le(z.data(), 4) != 0x06064b50) throw IoError(path + ": corrupt zip archive (bad ZIP64 end record)");
    entries = le(z.data() + 32, 8);
    cd_size = le(z.data() + 40, 8);
    cd_off = le(z.data() + 48, 8);
  }
  if (cd_off > size || cd_size > size - cd_off || entries > cd_size / 46)
    throw IoError(path + ": corrupt zip archive (its central directory does not fit the file)");
  const auto cd = read_at(f, cd_off, cd_size, path);
  uint64_t total = 0;
  size_t p = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (p + 46 > cd.size() || le(&cd[p], 4) != 0x02014b50) throw IoError(path + ": corrupt zip archive (bad central directory entry)");
    uint64_t usize = le(&cd[p + 24], 4);
    const size_t name_len = le(&cd[p + 28], 2), extra_len = le(&cd[p + 30], 2), comment_len = le(&cd[p + 32], 2);
    if (p + 46 + name_len + extra_len + comment_len > cd.size()) throw IoError(path + ": corrupt zip archive (entry past its directory)");
    if (usize == 0xFFFFFFFF) {  // the ZIP64 extended information extra field (id 1) holds it, first
      for (size_t x = p + 46 + name_len, end = x + extra_len; x + 4 <= end;) {
        const uint64_t id = le(&cd[x], 2), len = le(&cd[x + 2], 2);
        if (id == 1 && len >= 8 && x + 12 <= end) {
          usize = le(&cd[x + 4], 8);
          break;
        }
        x += 4 + len;
      }
    }
    if (usize > std::numeric_limits<uint64_t>::max() - total) throw IoError(path + ": corrupt zip archive (sizes overflow)");
    total += usize;
    p += 46 + name_len + extra_len + comment_len;
  }
  return total;
}

uint64_t model_unpack_limit() {
  if (const char* v = std::getenv("QFX_MAX_MODEL_BYTES"); v && *v) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (*end || x == 0 || *v == '-')
      throw ConfigError(std::string("environment variable QFX_MAX_MODEL_BYTES='") + v + "': expected a positive number of bytes");
    return x;
  }
  std::ifstream m("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (m >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return std::numeric_limits<uint64_t>::max();
}

void check_unpacked_size(const std::string& path, const std::string& corrupt) {
  uint64_t unpacked = 0;
  try {
    unpacked = zip_unpacked_size(path);
  } catch (const IoError& e) {  // "<path>: <reason>" -> "<path>: <corrupt>: <reason>"
    const std::string m = e.what();
    throw IoError(path + ": " + corrupt + ": " + (m.rfind(path + ": ", 0) == 0 ? m.substr(path.size() + 2) : m));
  }
  const uint64_t limit = model_unpack_limit();
  if (unpacked <= limit) return;
  auto mb = [](uint64_t b) { return std::to_string(b / 1000000) + " MB"; };
  throw IoError(path + ": the archive unpacks to " + mb(unpacked) + ", more than the " + mb(limit) +
                (std::getenv("QFX_MAX_MODEL_BYTES") ? " that QFX_MAX_MODEL_BYTES allows"
                                                    : " of memory available (QFX_MAX_MODEL_BYTES sets another limit)"));
}

}  // namespace qfx::fx::detail
