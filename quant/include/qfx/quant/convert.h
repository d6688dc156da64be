// convert_fx: a calibrated (or QAT-trained) prepared model -> the deployable int8
// ONNX model in QDQ form, with its encodings.
#pragma once

#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"

namespace qfx::quant {

/// Options of convert_fx.
struct ConvertOptions {
  /// Shape of each graph input, outermost first; -1 marks a dynamic dimension
  /// (the batch, typically): `{{-1, 3, 224, 224}}`.
  std::vector<std::vector<int64_t>> input_shapes;
  /// Names of the ONNX graph inputs and outputs (default: the placeholders'
  /// names, and "output" / "output_K").
  std::vector<std::string> input_names, output_names;
  /// ONNX opset of the default domain (13..17).
  int opset = 13;
  /// Export the float model instead: FakeQuantize nodes become pass-throughs and
  /// weights stay float (batch norm folded). `ConvertResult::observed` then lists
  /// where each FakeQuantize sat; this is the graph `calibrate` runs.
  bool float_model = false;
};

/// One quantized tensor of the converted model (what encodings.json lists).
struct Encoding {
  std::string tensor;           ///< ONNX value name (the QuantizeLinear input)
  std::string quantized;        ///< ONNX value name of the QuantizeLinear output (the int8 codes)
  std::string node;             ///< fx node it came from
  std::string dtype;            ///< "u8" or "s8"
  std::vector<float> scale;     ///< one per tensor, or one per channel
  std::vector<int32_t> zero_point;
  int64_t axis = -1;            ///< channel axis, -1 for per-tensor
  int64_t quant_min = 0, quant_max = 255;
  std::string algorithm;        ///< how the range was chosen ("minmax", "entropy", "fixed", ...)
  float observed_min = 0, observed_max = 0;
};

/// One FakeQuantize call of the prepared graph and the ONNX value it observes.
struct ObservedValue {
  std::string module;  ///< qualified name of the FakeQuantize module (shared ones appear once per call)
  std::string node;    ///< fx node whose output it observes
  std::string tensor;  ///< ONNX value name
};

/// What convert_fx produced.
struct ConvertResult {
  std::vector<ObservedValue> observed; ///< float_model: every activation FakeQuantize call, in graph order
  std::vector<Encoding> encodings;
  std::vector<std::string> float_ops;  ///< "node (op): why it stays float"
  int quantized_weights = 0;           ///< conv / linear weights stored as int8
};

/// Converts a prepared GraphModule (prepare_fx after calibration, or
/// prepare_qat_fx after training) into an ONNX model at `path`, written to a
/// temporary name first and renamed (no half-written file):
/// - every FakeQuantize becomes QuantizeLinear -> DequantizeLinear with its
///   current qparams (sub-8-bit ranges add a Clip to the range after DQ);
/// - weighted modules become Conv / Gemm with s8 weights (per-channel on axis 0
///   when so quantized, batch norm folded from running statistics), an int32 bias
///   with scale = input scale x weight scale, and their fused ReLU / ReLU6;
/// - other modules and aten ops become their ONNX ops; ops that stay float are
///   listed in `float_ops`.
/// Follows the ONNX QDQ format (QuantizeLinear / DequantizeLinear, opset >= 13).
/// Throws UnsupportedOpError naming the node for what ONNX cannot express here
/// (wrapped calls, unsupported aten ops), IoError if `path` cannot be written.
ConvertResult convert_fx(fx::GraphModule& gm, const std::string& path, const ConvertOptions& options);

/// Writes `encodings.json` for a converted model: {"graph_hash", "backend",
/// "activations": {ONNX tensor: {node, dtype, scale[], zero_point[], axis, quant_min,
/// quant_max, algorithm, observed_min, observed_max}}}. `graph_hash` is
/// `graph_hash(gm)` of the prepared model. Throws IoError if `path` cannot be written.
void write_encodings(const std::string& path, const ConvertResult& result, const std::string& graph_hash,
                     const std::string& backend);

/// Like convert_fx, but returns the serialized ONNX ModelProto instead of writing
/// a file (for `runtime::Model::load_from_string`). Same errors, minus IoError.
std::string export_onnx(fx::GraphModule& gm, const ConvertOptions& options, ConvertResult* result);

}  // namespace qfx::quant
