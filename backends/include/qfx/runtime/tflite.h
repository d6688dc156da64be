// Writing a converted int8 model as a TFLite flatbuffer (LiteRT), in TFLite's
// quantization scheme: int8 activations (asymmetric, per tensor), int8 weights
// symmetric per output channel, int32 biases with scale input_scale x weight_scale.
#pragma once

#include <string>
#include <vector>

namespace qfx::runtime {

/// Options of write_tflite.
struct TfliteOptions {
  /// The model's inputs and outputs as int8 codes (true), or float32 with a
  /// QUANTIZE after each input and a DEQUANTIZE before each output (false: what the
  /// QDQ ONNX model takes and returns).
  bool int8_io = false;
  /// How errors name the model (default: the ONNX path).
  std::string what;
};

/// What write_tflite wrote: the TFLite builtin operators by name, in graph order.
struct TfliteSummary {
  std::vector<std::string> ops;     ///< "CONV_2D", "ADD", ...
  std::vector<std::string> inputs;  ///< graph input names (NHWC where 4-D)
  std::vector<std::string> outputs;
};

/// True when this build writes TFLite: the TFLite schema (from ai-edge-litert's
/// generated builders) and FlatBuffers' C++ library were found when qfx was built.
bool tflite_available();

/// Writes the int8 QDQ ONNX model at `onnx_path` (as `qfx ptq` writes it) as a TFLite
/// flatbuffer (schema version 3, file identifier "TFL3") at `tflite_path`, atomically.
/// The QDQ groups become TFLite's int8 builtins: Conv -> CONV_2D or
/// DEPTHWISE_CONV_2D (explicit pads that are neither SAME nor VALID: a PAD first),
/// Gemm / MatMul with constant weights -> FULLY_CONNECTED, Add -> ADD, Mul -> MUL,
/// MaxPool -> MAX_POOL_2D, AveragePool -> AVERAGE_POOL_2D, GlobalAveragePool -> MEAN
/// over H, W, Concat -> CONCATENATION, Relu / Clip -> fused activations (RELU,
/// RELU6, RELU_N1_TO_1) or RELU / RELU6 ops, Flatten / Reshape -> RESHAPE (after a
/// TRANSPOSE back to NCHW order when a 4-D value with spatial extent is flattened).
/// 4-D activations are NHWC, as TFLite's kernels take them: a model input
/// [N, C, H, W] in ONNX is [N, H, W, C] in the .tflite; the batch stays dynamic
/// (shape_signature -1) where the ONNX model's is. LiteRT computes TFLite's
/// fixed-point arithmetic, which qfx simulates under the `tflite_like` target
/// (docs/targets.md). Throws IoError for an unreadable model or an unwritable path,
/// UnsupportedOpError naming the node for an op (or float op) without a TFLite int8
/// form, DataError naming the node for qparams TFLite cannot express (uint8 or int16
/// activations, weights with a zero point, a per-channel activation), and
/// UnsupportedOpError when tflite_available() is false.
TfliteSummary write_tflite(const std::string& onnx_path, const std::string& tflite_path, const TfliteOptions& options = {});

}  // namespace qfx::runtime
