// Internal: an ONNX file's ModelProto read into libtorch tensors and plain
// attribute values (the protobuf types stay inside the onnx_model folder).
#pragma once

#include <ATen/core/Tensor.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qfx::fx::onnx_detail {

/// Parses the ModelProto at `path`. Throws IoError for a missing, unreadable,
/// truncated or non-ONNX file and for a model without a graph.
onnx::ModelProto read_model(const std::string& path);

/// The opset of the default ("" / "ai.onnx") domain; UnsupportedOpError naming
/// the file for an opset below 13 or an operator set of another domain that a
/// node uses.
int64_t default_opset(const onnx::ModelProto& m, const std::string& path);

/// A TensorProto as a libtorch tensor (float32, float16 (as float32), float64 (as
/// float32), int8, uint8, int16, int32, int64, bool), its payload checked against
/// its dims before anything is allocated. External data is read from the file
/// its `location` names, relative to `model_dir` and inside it. Throws IoError
/// naming `path` and the tensor for a short, missing or escaping payload, DataError
/// for another element type.
at::Tensor to_tensor(const onnx::TensorProto& tp, const std::string& path, const std::string& model_dir);

/// A node attribute by name, or nullptr.
const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name);
int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def);
float attr_f(const onnx::NodeProto& n, const std::string& name, float def);
std::string attr_s(const onnx::NodeProto& n, const std::string& name, const std::string& def);
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> def = {});

}  // namespace qfx::fx::onnx_detail
