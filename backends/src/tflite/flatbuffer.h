// Internal: a TFLite model being written (tensors, buffers, operators of one
// subgraph) and its serialization with FlatBuffers' C++ builder, the field numbers
// taken from the build-time schema header (tools/tflite/schema_header.py).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace flatbuffers {
class FlatBufferBuilder;
}

namespace qfx::runtime::tflite {

/// One tensor: shape (NHWC for 4-D activations), element type (a TensorType
/// value), constant bytes (empty: computed), quantization (scales / zero points
/// along `qdim`; none when `scale` is empty).
struct TensorDef {
  std::string name;
  std::vector<int32_t> shape;
  std::vector<int32_t> signature;  ///< shape_signature (-1 for a dynamic dim); empty: static
  int64_t type = 0;
  std::string data;
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  int32_t qdim = 0;
};

/// Writes a builtin operator's options table; returns its offset (flatbuffers'
/// uoffset_t) on the builder.
using OptionsWriter = std::function<uint32_t(flatbuffers::FlatBufferBuilder&)>;

/// One operator: builtin code, tensor indices, options (BuiltinOptions type 0: none).
struct OpDef {
  int64_t code = 0;
  std::string name;  ///< for messages and the summary ("CONV_2D")
  std::vector<int32_t> inputs, outputs;
  int64_t options_type = 0;
  OptionsWriter options;
};

/// A single-subgraph TFLite model.
struct ModelDef {
  std::vector<TensorDef> tensors;
  std::vector<OpDef> ops;
  std::vector<int32_t> inputs, outputs;
  /// Appends a tensor and returns its index.
  int32_t add(TensorDef t);
  /// The flatbuffer: schema version 3, file identifier "TFL3", one buffer per
  /// constant tensor (buffer 0 empty, as TFLite's converter writes), constant data
  /// 16-byte aligned.
  std::string serialize(const std::string& description) const;
};

}  // namespace qfx::runtime::tflite
