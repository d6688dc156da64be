// The runtime's tensor: a dense, row-major buffer with a shape and a dtype.
// No libtorch here: the runtime builds with oneDNN only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace qfx::runtime {

/// Element types the runtime stores. Values match nothing external; use
/// `dtype_name()` / `dtype_size()` to talk about them.
enum class DType : uint8_t { kFloat32, kInt8, kUInt8, kInt32, kInt64, kBool, kInt16 };

/// Size of one element of `t` in bytes (4, 1, 1, 4, 8, 1, 2).
size_t dtype_size(DType t);
/// Throws DataError naming `what()` if `bytes` exceed this machine's physical
/// memory: a corrupt or hostile model's shapes must not make qfx try to
/// allocate them (the ONNX fuzzer found a 1 KB model asking for 154 GB).
/// `what` runs only to word that error, so allocation paths pay no string work.
void check_allocatable(uint64_t bytes, const std::function<std::string()>& what);
/// Lower-case name as NumPy spells it: "float32", "int8", "uint8", "int32", "int64", "bool", "int16".
const char* dtype_name(DType t);

/// A dense row-major tensor. Owns its bytes (shared between copies: copying a
/// Tensor is cheap and aliases the same buffer, like at::Tensor).
class Tensor {
 public:
  /// An empty (undefined) tensor.
  Tensor() = default;
  /// Allocates a zero-filled tensor of `shape` (each dim >= 0) and `dtype`.
  /// Throws `qfx::DataError` for a negative dimension.
  Tensor(std::vector<int64_t> shape, DType dtype);
  /// A tensor over existing bytes (no copy, no zeroing): `storage` must hold at
  /// least `numel * dtype_size` bytes and stays alive as long as the tensor.
  Tensor(std::vector<int64_t> shape, DType dtype, std::shared_ptr<uint8_t[]> storage);
  /// The same bytes under another shape with the same number of elements.
  /// Throws `qfx::DataError` if the element counts differ.
  Tensor view(std::vector<int64_t> shape) const;
  /// A deep copy with its own storage.
  Tensor clone() const;

  /// Shape, outermost dimension first (e.g. `[N, C, H, W]`).
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Element type.
  DType dtype() const { return dtype_; }
  /// Number of elements (product of the shape; 1 for a scalar).
  int64_t numel() const;
  /// Size of the data in bytes.
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  /// False for a default-constructed tensor.
  bool defined() const { return data_ != nullptr; }
  /// Raw data, row-major. Typed access: `data<float>()`.
  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  /// Typed view of the data; T must match `dtype()` (not checked).
  template <typename T> T* data() { return static_cast<T*>(raw()); }
  template <typename T> const T* data() const { return static_cast<const T*>(raw()); }
  /// "[2, 3, 4] float32"
  std::string describe() const;
  /// The value of a one-element tensor (any shape holding exactly one element) of
  /// any dtype, converted to double. Throws DataError naming the shape and dtype
  /// for any other tensor (where a scalar attribute or Clip bound is expected).
  double scalar() const;

 private:
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<uint8_t[]> data_;
};

}  // namespace qfx::runtime
