#include "qfx/quant/data.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <cstdlib>
#include <vector>

#include "qfx/error.h"

namespace qfx::quant {

at::Tensor read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) throw IoError(path + ": cannot open IDX file (missing or unreadable)");
  std::vector<unsigned char> buf;
  unsigned char chunk[1 << 16];
  int got;
  while ((got = gzread(f, chunk, sizeof chunk)) > 0) buf.insert(buf.end(), chunk, chunk + got);
  const bool err = got < 0;
  gzclose(f);
  if (err) throw IoError(path + ": corrupt or truncated gzip data");
  if (buf.size() < 4 || buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08)
    throw IoError(path + ": not an IDX ubyte file (bad magic number)");
  const int ndim = buf[3];
  if (ndim < 1 || ndim > 4 || buf.size() < 4 + 4 * static_cast<size_t>(ndim))
    throw IoError(path + ": not an IDX file (bad header)");
  std::vector<int64_t> shape;
  size_t count = 1;
  for (int i = 0; i < ndim; ++i) {
    const unsigned char* p = &buf[4 + 4 * static_cast<size_t>(i)];
    const int64_t d = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | int64_t{p[3]};
    if (d == 0) throw IoError(path + ": IDX header has a dimension of size 0 (no data)");
    shape.push_back(d);
    if (__builtin_mul_overflow(count, static_cast<size_t>(d), &count) || count > buf.size())
      throw IoError(path + ": truncated IDX file (header promises more data than the file holds)");
  }
  const size_t off = 4 + 4 * static_cast<size_t>(ndim);
  if (buf.size() != off + count)
    throw IoError(path + ": truncated IDX file (header promises " + std::to_string(count) + " bytes of data, found " +
                  std::to_string(buf.size() - off) + ")");
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kByte));
  std::copy(buf.begin() + static_cast<long>(off), buf.end(), t.data_ptr<uint8_t>());
  return t;
}

at::Tensor load_idx_images(const std::string& path, int64_t limit, double mean, double std) {
  at::Tensor t = read_idx(path);
  if (t.dim() != 3) throw IoError(path + ": expected IDX images [N, rows, cols], got rank " + std::to_string(t.dim()));
  if (limit > 0 && limit < t.size(0)) t = t.slice(0, 0, limit);
  return ((t.to(at::kFloat).div_(255.0) - mean) / std).unsqueeze(1).contiguous();
}

at::Tensor load_idx_labels(const std::string& path, int64_t limit) {
  at::Tensor t = read_idx(path);
  if (t.dim() != 1) throw IoError(path + ": expected IDX labels [N], got rank " + std::to_string(t.dim()));
  if (limit > 0 && limit < t.size(0)) t = t.slice(0, 0, limit);
  return t.to(at::kLong).contiguous();
}

std::string fashion_mnist_dir() {
  if (const char* e = std::getenv("QFX_FASHION_MNIST")) return e;
  return "/usr/share/datasets/fashion-mnist";
}

}  // namespace qfx::quant
