#include "qfx/runtime/tensor.h"

#include <unistd.h>

#include <cstring>
#include <sstream>

#include "qfx/error.h"

namespace qfx::runtime {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
  }
  return 0;
}

void check_allocatable(uint64_t bytes, const std::function<std::string()>& what) {
  static const uint64_t phys = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  }();
  if (phys > 0 && bytes > phys)
    throw DataError(what() + " needs " + std::to_string(bytes) + " bytes, more than this machine's memory (" +
                    std::to_string(phys) + " bytes)");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kInt16: return "int16";
  }
  return "?";
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  // Dimensions non-negative and the byte count representable (at most 2^48 bytes:
  // beyond any machine, and far from overflowing int64 in later index arithmetic).
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype_));
  for (int64_t d : shape_) {
    if (d < 0) throw DataError("tensor shape has a negative dimension: " + describe());
    if (d != 0 && bytes > (int64_t{1} << 48) / d) throw DataError("tensor of shape " + describe() + " is too large to allocate");
    bytes *= d;
  }
  size_t n = nbytes();
  check_allocatable(n, [this] { return "a tensor of shape " + describe(); });
  data_ = std::shared_ptr<uint8_t[]>(new uint8_t[n == 0 ? 1 : n]);
  std::memset(data_.get(), 0, n == 0 ? 1 : n);
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, std::shared_ptr<uint8_t[]> storage)
    : shape_(std::move(shape)), dtype_(dtype), data_(std::move(storage)) {
  for (int64_t d : shape_) {
    if (d < 0) throw DataError("tensor shape has a negative dimension: " + describe());
  }
}

double Tensor::scalar() const {
  if (numel() != 1) throw DataError("expected a one-element tensor, got " + describe());
  switch (dtype_) {
    case DType::kFloat32: return data<float>()[0];
    case DType::kInt8: return data<int8_t>()[0];
    case DType::kUInt8: return data<uint8_t>()[0];
    case DType::kInt16: return data<int16_t>()[0];
    case DType::kInt32: return data<int32_t>()[0];
    case DType::kInt64: return static_cast<double>(data<int64_t>()[0]);
    case DType::kBool: return data<bool>()[0] ? 1.0 : 0.0;
  }
  throw DataError("expected a numeric tensor, got " + describe());
}

Tensor Tensor::view(std::vector<int64_t> shape) const {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype_;
  t.data_ = data_;
  if (t.numel() != numel()) throw DataError("cannot view " + describe() + " as " + t.describe());
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, dtype_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? ", " : "") << shape_[i];
  os << "] " << dtype_name(dtype_);
  return os.str();
}

}  // namespace qfx::runtime
