// ONNX TensorProto -> runtime Tensor: the element types qfx stores, 4-bit
// unpacking (onnx.ai "Type Int4" / "Type UInt4"), raw_data and typed storage.
#include "onnx_tensor.h"

#include <climits>
#include <cstring>
#include <filesystem>
#include <vector>

#include "qfx/error.h"
#include "qfx/onnx_external.h"

namespace qfx::runtime::ir {

DType onnx_dtype(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::kFloat32;
    case onnx::TensorProto::INT8: return DType::kInt8;
    case onnx::TensorProto::UINT8: return DType::kUInt8;
    case onnx::TensorProto::INT16: return DType::kInt16;
    case onnx::TensorProto::UINT16: return DType::kInt32;
    case onnx::TensorProto::INT32: return DType::kInt32;
    case onnx::TensorProto::INT64: return DType::kInt64;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case kOnnxInt4: return DType::kInt8;
    case kOnnxUInt4: return DType::kUInt8;
    default:
      throw DataError(what + ": ONNX tensor type " + std::to_string(t) +
                      " is not supported (float32, int4, uint4, int8, uint8, int16, uint16, int32, int64, bool)");
  }
}

bool onnx_integer_type(int64_t t, DType* storage, int32_t* lo, int32_t* hi) {
  struct Row {
    int64_t type;
    DType storage;
    int32_t lo, hi;
  };
  static const Row rows[] = {
      {kOnnxInt4, DType::kInt8, -8, 7},
      {kOnnxUInt4, DType::kUInt8, 0, 15},
      {onnx::TensorProto::INT8, DType::kInt8, -128, 127},
      {onnx::TensorProto::UINT8, DType::kUInt8, 0, 255},
      {onnx::TensorProto::INT16, DType::kInt16, -32768, 32767},
      {onnx::TensorProto::UINT16, DType::kInt32, 0, 65535},
      {onnx::TensorProto::INT32, DType::kInt32, INT32_MIN, INT32_MAX},
  };
  for (const Row& r : rows)
    if (r.type == t) return *storage = r.storage, *lo = r.lo, *hi = r.hi, true;
  return false;
}

std::string qdq_refusal(const Node& n) {
  if (n.op != "QuantizeLinear" && n.op != "DequantizeLinear") return "";
  if (const int64_t b = n.attr_i("block_size", 0); b != 0) return "block_size " + std::to_string(b);
  const int64_t t = n.attr_i("output_dtype", 0);
  const bool has_zp = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (t == kOnnxInt4 || t == kOnnxUInt4 || t == onnx::TensorProto::UINT16 || (t != 0 && !has_zp))
    return "output_dtype " + std::to_string(t);
  return "";
}

namespace {

bool four_bit(int t) { return t == kOnnxInt4 || t == kOnnxUInt4; }

// Element count of `shape`, refusing what a corrupt file could claim.
uint64_t checked_count(const std::vector<int64_t>& shape, const std::string& what) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw IoError(what + " has a negative dimension");
    if (d != 0 && n > (uint64_t{1} << 48) / static_cast<uint64_t>(d)) throw IoError(what + " declares too many elements");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// Element i of packed 4-bit bytes (low nibble first), sign-extended for INT4.
int8_t nibble(uint8_t byte, uint64_t i, bool is_signed) {
  const int v = (i & 1) ? byte >> 4 : byte & 0x0F;
  return static_cast<int8_t>(is_signed && v >= 8 ? v - 16 : v);
}

// Bytes of raw_data (or of external data) that `n` elements of ONNX type `t`,
// stored as `dtype`, take: 4-bit types packed two per byte, UINT16 two bytes each.
uint64_t raw_bytes(int t, DType dtype, uint64_t n) {
  return four_bit(t) ? (n + 1) / 2 : t == onnx::TensorProto::UINT16 ? 2 * n : n * dtype_size(dtype);
}

// The payload's size (bytes of raw_data, or entries of the typed field) and what
// the shape needs; throws IoError when they differ.
void check_payload(const onnx::TensorProto& tp, DType dtype, uint64_t n, const std::string& what) {
  const int t = tp.data_type();
  uint64_t got = 0, want = n;
  if (tp.has_raw_data()) {
    got = tp.raw_data().size();
    want = raw_bytes(t, dtype, n);
  } else if (dtype == DType::kFloat32) {
    got = static_cast<uint64_t>(tp.float_data_size());
  } else if (dtype == DType::kInt64) {
    got = static_cast<uint64_t>(tp.int64_data_size());
  } else {
    got = static_cast<uint64_t>(tp.int32_data_size());
    if (four_bit(t)) want = (n + 1) / 2;
  }
  if (got != want)
    throw IoError(what + " holds " + std::to_string(got) + (tp.has_raw_data() ? " bytes" : " values") + ", expected " +
                  std::to_string(want));
}

// Typed-field and packed payloads, element by element into `t`.
void decode_narrow(const onnx::TensorProto& tp, Tensor& t, uint64_t n) {
  const int type = tp.data_type();
  const bool raw = tp.has_raw_data();
  auto byte = [&](uint64_t k) -> uint32_t {
    return raw ? static_cast<uint8_t>(tp.raw_data()[k]) : static_cast<uint32_t>(tp.int32_data(static_cast<int>(k)));
  };
  for (uint64_t i = 0; i < n; ++i) {
    if (four_bit(type)) {
      const int8_t v = nibble(static_cast<uint8_t>(byte(i / 2)), i, type == kOnnxInt4);
      if (type == kOnnxInt4) t.data<int8_t>()[i] = v;
      else t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    } else if (type == onnx::TensorProto::UINT16) {  // little-endian pairs, or the entry's low 16 bits
      t.data<int32_t>()[i] = raw ? static_cast<int32_t>(byte(2 * i) | (byte(2 * i + 1) << 8))
                                 : static_cast<int32_t>(byte(i) & 0xFFFFu);
    } else if (t.dtype() == DType::kInt16) {
      t.data<int16_t>()[i] = static_cast<int16_t>(byte(i) & 0xFFFFu);
    } else if (t.dtype() == DType::kInt8) {
      t.data<int8_t>()[i] = static_cast<int8_t>(byte(i) & 0xFFu);
    } else {  // uint8, bool
      t.data<uint8_t>()[i] = static_cast<uint8_t>(byte(i) & 0xFFu);
    }
  }
}

}  // namespace

Tensor to_tensor(const onnx::TensorProto& tp, const std::string& file) {
  const std::string what = file + ": tensor '" + tp.name() + "'";
  std::vector<int64_t> shape(tp.dims().begin(), tp.dims().end());
  const DType dtype = onnx_dtype(tp.data_type(), what);
  // The payload must match the declared shape before anything is allocated: a
  // corrupt file must not make qfx allocate whatever its dims claim.
  const uint64_t n = checked_count(shape, what);
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {  // read as raw_data from the file beside the model
    if (!file.empty() && file[0] == '<')
      throw IoError(what + " uses external data, which a model given as bytes cannot carry (load it from its file)");
    const std::string dir = std::filesystem::path(file).parent_path().string();
    onnx::TensorProto inline_tp = tp;  // no payload to copy: it is in the file
    inline_tp.clear_external_data();
    inline_tp.set_data_location(onnx::TensorProto::DEFAULT);
    inline_tp.set_raw_data(
        onnx_external::external_bytes(tp, what, dir.empty() ? "." : dir, raw_bytes(tp.data_type(), dtype, n)));
    return to_tensor(inline_tp, file);
  }
  check_payload(tp, dtype, n, what);
  Tensor t(shape, dtype);
  const int type = tp.data_type();
  const bool stored_as_is = !four_bit(type) && type != onnx::TensorProto::UINT16;
  if (tp.has_raw_data() && stored_as_is) {
    if (t.nbytes()) std::memcpy(t.raw(), tp.raw_data().data(), t.nbytes());
  } else if (!tp.has_raw_data() && dtype == DType::kFloat32) {
    std::copy(tp.float_data().begin(), tp.float_data().end(), t.data<float>());
  } else if (!tp.has_raw_data() && dtype == DType::kInt64) {
    std::copy(tp.int64_data().begin(), tp.int64_data().end(), t.data<int64_t>());
  } else if (!tp.has_raw_data() && type == onnx::TensorProto::INT32) {
    std::copy(tp.int32_data().begin(), tp.int32_data().end(), t.data<int32_t>());
  } else {
    decode_narrow(tp, t, n);
  }
  return t;
}

}  // namespace qfx::runtime::ir
