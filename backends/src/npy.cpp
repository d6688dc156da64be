#include "qfx/runtime/npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "qfx/atomic_file.h"
#include "qfx/error.h"

namespace qfx::runtime {
namespace {

struct DTypeCode { const char* descr; DType dtype; };
constexpr DTypeCode kCodes[] = {
    {"<f4", DType::kFloat32}, {"|i1", DType::kInt8}, {"|u1", DType::kUInt8},
    {"<i4", DType::kInt32},   {"<i8", DType::kInt64}, {"|b1", DType::kBool}, {"<i2", DType::kInt16},
};

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw IoError(path + ": " + why);
}

// The value of key `key` in the header's Python dict literal ({'descr': '<f4',
// 'fortran_order': False, 'shape': (2, 3), }): for a quoted value (`end` "'") the
// text between the quotes; otherwise the text after the colon up to the first
// character of `end` (not included, spaces trimmed) — for a tuple, from "(" to
// before ")". A linear scan: headers come from files.
std::string header_value(const std::string& path, const std::string& header, const std::string& key,
                         const std::string& end) {
  const std::string quoted = "'" + key + "'";
  size_t at = header.find(quoted);
  if (at == std::string::npos) fail(path, "header has no " + key);
  at = header.find_first_not_of(" \t", at + quoted.size());
  if (at == std::string::npos || header[at] != ':') fail(path, "header's " + key + " has no value");
  at = header.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos) fail(path, "header's " + key + " has no value");
  if (end == "'") {
    if (header[at] != '\'') fail(path, "header's " + key + " is not a string");
    const size_t close = header.find('\'', at + 1);
    if (close == std::string::npos) fail(path, "header's " + key + " string is not closed");
    return header.substr(at + 1, close - at - 1);
  }
  if (end == ")" && header[at] != '(') fail(path, "header's " + key + " is not a tuple");
  const size_t stop = header.find_first_of(end, at);
  if (stop == std::string::npos) fail(path, "header's " + key + " value is not closed");
  std::string v = header.substr(at, stop - at);
  v.erase(v.find_last_not_of(" \t") + 1);
  return v;
}

}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open (missing or unreadable)");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic)");
  uint32_t header_len = 0;
  const int major = static_cast<unsigned char>(magic[6]);
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) fail(path, "truncated header");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) fail(path, "truncated header");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (header_len > (1u << 20)) fail(path, "header too large");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(path, "truncated header");

  const std::string descr = header_value(path, header, "descr", "'");
  const std::string fortran = header_value(path, header, "fortran_order", ",}");
  if (fortran != "True" && fortran != "False") fail(path, "header's fortran_order is neither True nor False");
  if (fortran == "True") fail(path, "Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
  const std::string shape_text = header_value(path, header, "shape", ")");  // "(2, 3"
  // The shape tuple: "", "3,", "2, 3" — each entry a non-negative integer.
  std::vector<int64_t> shape;
  {
    const std::string dims = shape_text.substr(1);
    std::stringstream ss(dims);
    std::string tok;
    std::vector<std::string> toks;
    while (std::getline(ss, tok, ',')) toks.push_back(tok);
    for (size_t i = 0; i < toks.size(); ++i) {
      std::string d = toks[i];
      d.erase(0, d.find_first_not_of(" \t"));
      d.erase(d.find_last_not_of(" \t") + 1);
      if (d.empty() && i + 1 == toks.size() && i > 0) break;  // the trailing comma of "(3,)"
      if (d.empty() || d.size() > 15 || d.find_first_not_of("0123456789") != std::string::npos)
        fail(path, "bad shape '(" + dims + ")' in the header (expected non-negative integers)");
      shape.push_back(std::stoll(d));
    }
  }
  const DTypeCode* code = nullptr;
  for (const auto& c : kCodes) if (descr == c.descr) code = &c;
  if (!code) fail(path, "unsupported dtype '" + descr + "' (float32, int8, uint8, int32, int64, bool are)");
  // The data must be in the file: check before allocating (a header can claim anything).
  const std::streampos data_at = in.tellg();
  in.seekg(0, std::ios::end);
  const int64_t available = static_cast<int64_t>(in.tellg() - data_at);
  in.seekg(data_at);
  const int64_t elem = static_cast<int64_t>(dtype_size(code->dtype));
  // An array with a zero dimension anywhere holds no data (and needs none).
  const bool empty = std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end();
  int64_t need = elem;
  for (int64_t d : shape) {
    if (empty) break;
    if (need > available / d) {
      fail(path, "truncated data: the header's shape needs more than the " + std::to_string(available) +
                     " bytes the file holds");
    }
    need *= d;
  }

  Tensor t(shape, code->dtype);
  if (t.nbytes() > 0 && !in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes())))
    fail(path, "truncated data: expected " + std::to_string(t.nbytes()) + " bytes for " + t.describe());
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& c : kCodes) if (c.dtype == t.dtype()) descr = c.descr;
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i) h << t.shape()[i] << (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  h << "), }";
  std::string header = h.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');

  write_atomic(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, "cannot open for writing");
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write("\x93NUMPY\x01\x00", 8);
    const char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(lb, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out) fail(path, "write failed");
  });
}

}  // namespace qfx::runtime
