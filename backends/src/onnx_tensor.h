// Internal: ONNX TensorProto -> runtime Tensor, and ONNX element types -> runtime
// dtypes (onnx_import.cpp and the QuantizeLinear type checks read these).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "ir.h"

namespace qfx::runtime::ir {

// The 4-bit types (kOnnxInt4, kOnnxUInt4) are in ir.h: the Debian onnx.proto (1.12)
// does not name them; TensorProto.data_type and TypeProto.Tensor.elem_type are
// int32 fields, so they arrive as plain numbers.

/// The runtime dtype that stores ONNX element type `t` (TensorProto.DataType):
/// FLOAT float32, INT8 int8, UINT8 uint8, INT16 int16, INT32 int32, INT64 int64,
/// BOOL bool, and the types stored wider: INT4 as int8 (sign-extended, -8..7),
/// UINT4 as uint8 (0..15), UINT16 as int32 (0..65535). Throws DataError naming
/// `what` for any other type (float16, float8, double, string ...).
DType onnx_dtype(int t, const std::string& what);

/// Decodes an initializer or Constant value: raw_data (little-endian; 4-bit
/// types packed two per byte, element 0 in the low nibble, an odd count leaving
/// the last high nibble as padding) or the typed field (float_data, int64_data,
/// int32_data: one element per entry, 16-bit types in the low 16 bits, 4-bit types
/// one packed byte per entry as onnx.numpy_helper reads them). Throws IoError
/// naming the tensor and `file` for external data, a negative dimension, too many
/// elements, or a payload whose size does not match the shape; DataError for an
/// unsupported type.
Tensor to_tensor(const onnx::TensorProto& tp, const std::string& file);

}  // namespace qfx::runtime::ir
